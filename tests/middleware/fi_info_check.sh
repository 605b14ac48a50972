#!/usr/bin/env bash
# libfabric's verbs provider offers softverbs for every endpoint type it
# has: msg (verbs), rdm over msg (verbs;ofi_rxm), dgram (verbs, the
# "<dev>-dgram" domain) and rdm over dgram (verbs;ofi_rxd). `fi_info -p
# verbs`, run under softverbs-run as a user would.
set -u
run=${SOFTVERBS_RUN:?the softverbs-run launcher}
command -v fi_info >/dev/null || { echo "fi_info not installed"; exit 77; }
out=$("$run" fi_info -p verbs 2>&1)
echo "$out"
fail=0
for want in "verbs|softverbs0|FI_EP_MSG" "verbs;ofi_rxm|softverbs0|FI_EP_RDM" \
            "verbs|softverbs0-dgram|FI_EP_DGRAM" "verbs;ofi_rxd|softverbs0-dgram|FI_EP_RDM"; do
  IFS='|' read -r provider domain type <<<"$want"
  # One fi_info record: provider, fabric, domain, version, type lines.
  if awk -v p="$provider" -v d="$domain" -v t="$type" '
      /^provider:/ { prov = $2; dom = "" }
      /^ *domain:/ { dom = $2 }
      /^ *type:/ { if (prov == p && dom == d && $2 == t) found = 1 }
      END { exit !found }' <<<"$out"; then
    echo "ok:   $provider on $domain, $type"
  else
    echo "FAIL: no $provider on $domain, $type"; fail=1
  fi
done
exit $fail
