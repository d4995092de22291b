#!/usr/bin/env bash
# Lint (CI runs it before the tests): ruff over the Python sources ([tool.ruff] in pyproject.toml) and a
# clang-format check of every C/C++ source (.clang-format). Changes nothing; exits 1 naming what is off.
# To fix: ruff check --fix . && git ls-files -z '*.cpp' '*.h' '*.inc' | xargs -0 clang-format -i
# clang-format 14 (Debian bookworm's, what CI installs) is the reference: other major versions format differently.
set -uo pipefail
cd "$(dirname "$0")/.."

ruff=${RUFF:-$(command -v .venv/bin/ruff || command -v ruff)} || { echo "lint: ruff not found (pip install -e '.[test]')" >&2; exit 1; }
clang_format=${CLANG_FORMAT:-$(command -v clang-format)} || { echo "lint: clang-format not found (apt-get install clang-format)" >&2; exit 1; }
version=$("$clang_format" --version)
[[ $version =~ version\ 14\. ]] || echo "lint: warning: $version is not clang-format 14, which CI uses" >&2

status=0
"$ruff" check . || status=1
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    list_sources() { git ls-files -z -- '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' '*.inc'; }
else
    list_sources() { find . \( -name .venv -o -name build -o -name .git \) -prune -o -type f \
        \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.inc' \) -print0; }
fi
list_sources | xargs -0 "$clang_format" --dry-run --Werror || { echo "lint: clang-format would change the files above" >&2; status=1; }
exit $status
