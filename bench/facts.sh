# Sourced by the benchmark scripts (bench/inbox.sh, bench/pull.sh): the facts of the run that
# every page section states. Sets date_run, commit (the short HEAD, marked when tracked files
# have uncommitted changes), cores, cpu_model and mem_gb (GB of 10^9 bytes, uncut).
date_run="$(date -u '+%Y-%m-%d %H:%M')"
head_commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    commit="\`$head_commit\` with uncommitted changes"
else
    commit="\`$head_commit\`"
fi
cores="$(nproc)"
cpu_model="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
mem_gb="$(awk '/^MemTotal/ { printf "%.9f", $2 * 1024 / 1e9 }' /proc/meminfo)"
