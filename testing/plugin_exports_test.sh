#!/bin/sh
# Checks that each plugin shared object given as an argument exports exactly
# one dynamic symbol, DsaGetPluginApi (the version script hides the rest).
status=0
for so in "$@"; do
  exports=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVWiu]$/ {print $3}' | sort)
  if [ "$exports" != "DsaGetPluginApi" ]; then
    echo "FAIL: $so exports:" $exports
    status=1
  else
    echo "ok: $so exports only DsaGetPluginApi"
  fi
done
exit $status
