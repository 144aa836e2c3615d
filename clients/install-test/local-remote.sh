#!/bin/sh
# Usage: local-remote.sh DIR
#
# The clients' install tests fetch https://github.com/alternayte/queuebox exactly as the READMEs
# say, but offline and from this checkout. This script makes
#   DIR/queuebox   a bare repository whose branch main (its HEAD) is one commit: a snapshot of
#                  this working tree, tracked and untracked files minus what .gitignore ignores,
#                  so uncommitted work is what gets installed;
#   DIR/gitconfig  a git configuration that sends the README's URL (with or without .git) there.
# With GIT_CONFIG_GLOBAL=DIR/gitconfig, git clone, go get (direct) and cargo (with
# net.git-fetch-with-cli) fetch "https://github.com/alternayte/queuebox" from DIR/queuebox. The
# snapshot is made with a temporary index, so the checkout's own index and branches are untouched.
set -eu
dir=$(cd "$1" && pwd)
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
# commit-tree needs an identity; CI may have none configured.
export GIT_AUTHOR_NAME=queuebox-install-test GIT_AUTHOR_EMAIL=install-test@localhost
export GIT_COMMITTER_NAME=queuebox-install-test GIT_COMMITTER_EMAIL=install-test@localhost
index=$dir/snapshot.index
GIT_INDEX_FILE=$index git -C "$repo" read-tree HEAD
GIT_INDEX_FILE=$index git -C "$repo" add -A
tree=$(GIT_INDEX_FILE=$index git -C "$repo" write-tree)
rm -f "$index"
commit=$(git -C "$repo" commit-tree "$tree" -p HEAD -m "snapshot of the working tree for the install tests")
git init -q --bare "$dir/queuebox"
git -C "$repo" push -q "$dir/queuebox" "$commit:refs/heads/main"
git -C "$dir/queuebox" symbolic-ref HEAD refs/heads/main
cat > "$dir/gitconfig" <<CONFIG
[url "$dir/queuebox"]
	insteadOf = https://github.com/alternayte/queuebox
	insteadOf = https://github.com/alternayte/queuebox.git
CONFIG
