# Sourced by bench/busy.sh and bench/far_cores.sh after they set their defaults (rounds, runs,
# bins=(build/cli/ember), results): parses [--rounds N] [--runs R] [--peer PATH_TO_EMBER]
# [--out FILE] from "$@" into them (each --peer adds a build measured in the same rounds) and
# checks that every build is there.
script=$(basename "$0")
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --peer) bins+=("$2"); shift 2 ;;
    --out) results=$2; shift 2 ;;
    *) echo "usage: bench/$script [--rounds N] [--runs R] [--peer PATH_TO_EMBER] [--out FILE]" >&2; exit 1 ;;
  esac
done
for b in "${bins[@]}"; do
  [[ -x $b ]] || { echo "bench/$script: $b not found (build first: scripts/build.sh)" >&2; exit 1; }
done
