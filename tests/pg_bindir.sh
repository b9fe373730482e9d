#!/usr/bin/env bash
# Prints the directory holding PostgreSQL's server binaries (initdb, pg_ctl), which is not on PATH on Debian:
# $SERVICE_AUTH_PG_BINDIR, then pg_config --bindir, PATH, Debian's /usr/lib/postgresql/<newest>/bin, Homebrew's.
# Exits 1 with a line saying what to install when there is none.
for d in "${SERVICE_AUTH_PG_BINDIR:-}" "$(pg_config --bindir 2>/dev/null)" \
  "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")" \
  $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -rV) \
  $(ls -d /opt/homebrew/opt/postgresql*/bin /usr/local/opt/postgresql*/bin 2>/dev/null | sort -rV) \
  /opt/homebrew/bin /usr/local/bin; do
  if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; exit 0; fi
done
echo "PostgreSQL's server binaries (initdb, pg_ctl) are not installed: Debian \`apt-get install postgresql\`, macOS \`brew install postgresql@16\` (or set SERVICE_AUTH_PG_BINDIR)" >&2
exit 1
