// cli.h — subcommand entry points of the kda program (one function per command, each in
// its own cli_<name>.c). Each returns the process exit status.
#ifndef KDA_CLI_H
#define KDA_CLI_H
int cmd_train(int argc, char **argv);
int cmd_encode(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
#endif
