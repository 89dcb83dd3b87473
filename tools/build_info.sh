#!/usr/bin/env bash
# build_info.sh — one line naming the commit a build came from (and whether src/ or tests/ were
# modified) and when it was built, for the device logs (build/cuda-device*/BUILD_INFO).
cd "$(dirname "$0")/.."
printf 'commit %s%s, built %s, nvcc %s\n' "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  "$(git diff --quiet HEAD -- src tests 2>/dev/null || echo ' (modified)')" "$(date -u '+%F %H:%M UTC')" \
  "$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
