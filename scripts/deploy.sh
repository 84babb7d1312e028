#!/usr/bin/env bash
# Deploy a new worker build beside the running one, with a drain wait and a rollback
# (docs/operators.md, "Deploying a new version"). Start the new build's workers first, with
# AIRLOCK_BUILD_ID=NEW and AIRLOCK_PROMOTE=never, on the same task queue, store and keys.
#
#   scripts/deploy.sh NEW_BUILD OLD_BUILD        # promote NEW, check, wait for OLD to drain
#
# Exit status 0: NEW is current and OLD is drained (stop OLD's workers now).
# On a failed check after the promotion it rolls back to OLD and exits 1.
set -euo pipefail
new=${1:?usage: scripts/deploy.sh NEW_BUILD OLD_BUILD}
old=${2:?usage: scripts/deploy.sh NEW_BUILD OLD_BUILD}
airlock=${AIRLOCK:-airlock}

echo "› before: the deployment as it is"
"$airlock" deploy status || true

echo "› promote $new (refused while no worker of it polls)"
"$airlock" deploy promote "$new"

echo "› check: no build that new or pinned turns need is without a worker"
if ! "$airlock" deploy status; then
  echo "› a check failed after promoting $new: rolling back to $old"
  "$airlock" deploy promote "$old"
  exit 1
fi

echo "› wait until no running turn is pinned to $old"
"$airlock" deploy wait-drained "$old" --timeout "${DRAIN_TIMEOUT:-2h}"
echo "› done: $new is current and $old is drained; stop $old's workers"
