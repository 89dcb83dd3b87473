# fla_wheels.sh — FLA on the device machine (sourced, not run). That machine has torch and Triton
# but not FLA, and no network: the flash-linear-attention and fla-core wheels, downloaded here into
# .whl/ (docs/cuda.md), travel with the call (carry .whl) and are installed into $FLA_SITE
# (default /tmp/site), which goes on PYTHONPATH. One definition for every device script.
#   fla_site_path                $FLA_SITE on PYTHONPATH (once), for a shell whose install ran apart
#   fla_wheels_install [PYTHON]  nothing if PYTHON (default python3) imports fla as it is; else
#                                fla_site_path, and the wheels into $FLA_SITE unless they are
#                                there from an earlier call; 1 with a message if it cannot
fla_site_path() {
  local site=${FLA_SITE:-/tmp/site}
  case ":${PYTHONPATH:-}:" in
    *":$site:"*) ;;
    *) export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} ;;
  esac
}
fla_wheels_install() {
  local py=${1:-python3} site=${FLA_SITE:-/tmp/site}
  local has_fla='import importlib.util, sys; sys.exit(importlib.util.find_spec("fla") is None)'
  "$py" -c "$has_fla" 2>/dev/null && return 0 # installed on the machine (or a venv): leave PYTHONPATH
  fla_site_path
  "$py" -c "$has_fla" 2>/dev/null && return 0 # installed by an earlier call
  if ! compgen -G ".whl/*.whl" > /dev/null; then
    echo "fla_wheels_install: $py finds no fla and there is no .whl/*.whl in $PWD: download FLA's wheels (docs/cuda.md) and carry .whl" >&2
    return 1
  fi
  PIP_ROOT_USER_ACTION=ignore "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || {
    echo "fla_wheels_install: pip could not install .whl/*.whl into $site" >&2
    return 1
  }
}
