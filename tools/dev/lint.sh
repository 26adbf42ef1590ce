#!/usr/bin/env bash
# The house style, checked (`npm run lint`, the first step of `npm test`) or applied (`npm run format`):
#   C++: clang-format with .clang-format (Debian's clang-format 14; another version may format differently)
#   JS:  ESLint with eslint.config.js
#   Python: pyflakes3 (Debian's pyflakes3) over every .py file in the repository; it has no --fix
# Usage: tools/dev/lint.sh [--fix]   (--fix: clang-format -i, then eslint --fix; what --fix cannot fix is reported)
set -euo pipefail
cd "$(dirname "$0")/../.."

fix=false
case "${1:-}" in
  --fix) fix=true ;;
  "") ;;
  *) echo "usage: tools/dev/lint.sh [--fix]" >&2; exit 2 ;;
esac

shopt -s nullglob
cpp_files=(engine/*.h engine/*/*.cpp engine/*/*.h wasm/*.cpp wasm/*.h tests/cpp/*.cpp tests/cpp/*.h tests/fuzz/*.cpp tests/fuzz/*.h
           tools/cli/*.cpp tools/bench/*.cpp tools/bench/*.h)
# Tracked and new files, not the ignored ones (node_modules, build).
mapfile -t python_files < <(git ls-files --cached --others --exclude-standard -- '*.py')

if $fix; then
  clang-format -i "${cpp_files[@]}"
  npx eslint --fix .
  pyflakes3 "${python_files[@]}"
else
  if ! clang-format --dry-run --Werror "${cpp_files[@]}"; then
    echo "lint: C++ formatting differs from .clang-format ($(clang-format --version)); npm run format fixes it" >&2
    exit 1
  fi
  npx eslint .
  if ! pyflakes3 "${python_files[@]}"; then
    echo "lint: pyflakes3 found problems in the Python files above" >&2
    exit 1
  fi
fi
