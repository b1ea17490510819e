#!/usr/bin/env bash
# Makes (once) a Python virtual environment under .cache/datasette-venv with Datasette from
# PyPI: what the SQLite export's test serves an exported file with, to check that Datasette
# finds its tables, links and full-text index. Prints the venv's `datasette` on stdout
# (scripts/venv.sh says the rest).
exec "$(dirname "${BASH_SOURCE[0]}")/venv.sh" datasette-venv datasette \
    "./datasette --version" "datasette==0.65.5"
