#!/usr/bin/env bash
# The upstream CustomResourceDefinitions the tests install, copied unmodified
# from the Go modules that publish them, at the versions pinned below.
#
#   scripts/crds.sh update   copy them into the repository (make crds)
#   scripts/crds.sh check    fail when a committed copy differs (make generate/check)
#
# The module cache is the download: `go mod download` fetches each pinned
# module once from the module proxy. Kinds that no served module publishes
# (RHACM's KlusterletAddonConfig and ManagedClusterInfo, Hive's CRDs newer
# than its last served release) are carried as test data beside these, with
# their source named in the README of their folder; this script leaves them
# alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
case $mode in update | check) ;; *) echo "usage: scripts/crds.sh update|check" >&2; exit 2 ;; esac

hub=internal/hub/hubtest/crds
ocm=internal/hub/ocmtest/crds
gov=internal/hub/governancetest/crds
# module version file-in-module destination-in-repository
pins=$(cat <<PINS
open-cluster-management.io/api v1.3.0 cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml $hub/
open-cluster-management.io/api v1.3.0 cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml $hub/
open-cluster-management.io/api v1.3.0 cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml $hub/
open-cluster-management.io/api v1.3.0 cluster/v1alpha1/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml $hub/
open-cluster-management.io/api v1.3.0 cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml $hub/
open-cluster-management.io/api v1.3.0 cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml $hub/
open-cluster-management.io/api v1.3.0 work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml $hub/
open-cluster-management.io/governance-policy-propagator v0.19.0 deploy/crds/policy.open-cluster-management.io_placementbindings.yaml $hub/
open-cluster-management.io/ocm v1.0.0 manifests/cluster-manager/hub/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml $ocm/hub/
open-cluster-management.io/ocm v1.0.0 manifests/cluster-manager/hub/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml $ocm/hub/
open-cluster-management.io/ocm v1.0.0 manifests/cluster-manager/hub/0000_02_addon.open-cluster-management.io_addondeploymentconfigs.crd.yaml $ocm/hub/
open-cluster-management.io/ocm v1.0.0 manifests/cluster-manager/hub/0000_03_addon.open-cluster-management.io_addontemplates.crd.yaml $ocm/hub/
open-cluster-management.io/ocm v1.0.0 manifests/cluster-manager/hub/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml $ocm/hub/
open-cluster-management.io/ocm v1.0.0 manifests/cluster-manager/hub/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml $ocm/hub/
open-cluster-management.io/ocm v1.0.0 manifests/klusterlet/managed/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml $ocm/managed/
open-cluster-management.io/ocm v1.0.0 manifests/klusterlet/managed/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml $ocm/managed/
open-cluster-management.io/ocm v1.0.0 manifests/klusterlet/managed/clusterproperties.crd.yaml $ocm/managed/
open-cluster-management.io/governance-policy-propagator v0.19.0 deploy/crds/policy.open-cluster-management.io_policies.yaml internal/policyschema/
open-cluster-management.io/governance-policy-propagator v0.19.0 deploy/crds/policy.open-cluster-management.io_policysets.yaml $gov/
open-cluster-management.io/governance-policy-propagator v0.19.0 deploy/crds/policy.open-cluster-management.io_policyautomations.yaml $gov/
github.com/cloudnative-pg/cloudnative-pg v1.28.0 config/crd/bases/postgresql.cnpg.io_clusters.yaml templates/testdata/cnpg-crds/
github.com/cloudnative-pg/cloudnative-pg v1.28.0 config/crd/bases/postgresql.cnpg.io_scheduledbackups.yaml templates/testdata/cnpg-crds/
github.com/cloudnative-pg/cloudnative-pg v1.28.0 config/crd/bases/postgresql.cnpg.io_backups.yaml templates/testdata/cnpg-crds/
github.com/cloudnative-pg/cloudnative-pg v1.28.0 config/crd/bases/postgresql.cnpg.io_poolers.yaml templates/testdata/cnpg-crds/
PINS
)

# moddir prints the folder of module@version in the module cache,
# downloading it first when needed. It runs outside this module, so that
# nothing is added to go.mod or go.sum.
declare -A dirs
moddir() {
  local key=$1@$2
  if [ -z "${dirs[$key]:-}" ]; then
    local out
    out=$(cd / && GOFLAGS=-mod=mod go mod download -json "$key") || {
      echo "crds.sh: go mod download $key failed" >&2
      exit 1
    }
    dirs[$key]=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$out")
    [ -d "${dirs[$key]}" ] || { echo "crds.sh: no folder for $key" >&2; exit 1; }
  fi
  printf '%s\n' "${dirs[$key]}"
}

status=0
while read -r module version file dest; do
  src=$(moddir "$module" "$version")/$file
  [ -f "$src" ] || { echo "crds.sh: $module@$version has no $file" >&2; exit 1; }
  target=$root/$dest$(basename "$file")
  if [ "$mode" = update ]; then
    mkdir -p "$root/$dest"
    install -m 0644 "$src" "$target"
  elif ! cmp -s "$src" "$target"; then
    echo "crds.sh: $dest$(basename "$file") is not $module@$version's $file; run 'make crds' and commit the result" >&2
    status=1
  fi
done <<<"$pins"
[ "$mode" = check ] && [ $status = 0 ] && echo "crds.sh: the CRDs are the pinned upstream copies"
exit $status
