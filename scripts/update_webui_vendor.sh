#!/usr/bin/env bash
# Refresh the chat page's vendored libraries (pyllama_yield/webui/vendor/) from the npm registry:
# pinned versions, their published builds and licences; no Node build at install time.
# Usage: scripts/update_webui_vendor.sh   (edit the versions below, rerun, commit the result)
set -euo pipefail
MARKED=18.3.0
DOMPURIFY=3.5.0
HIGHLIGHTJS=11.12.0
out="$(cd "$(dirname "$0")/.." && pwd)/pyllama_yield/webui/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
npm pack --silent "marked@$MARKED" "dompurify@$DOMPURIFY" "@highlightjs/cdn-assets@$HIGHLIGHTJS" > /dev/null
for t in *.tgz; do mkdir "${t%.tgz}"; tar xzf "$t" -C "${t%.tgz}"; done
cp "marked-$MARKED/package/lib/marked.umd.js" "$out/marked.umd.js"
cp "marked-$MARKED/package/LICENSE" "$out/LICENSE.marked"
cp "dompurify-$DOMPURIFY/package/dist/purify.min.js" "$out/purify.min.js"
cp "dompurify-$DOMPURIFY/package/LICENSE" "$out/LICENSE.dompurify"
hl="highlightjs-cdn-assets-$HIGHLIGHTJS/package"
cp "$hl/highlight.min.js" "$out/highlight.min.js"
cp "$hl/styles/github.min.css" "$out/hljs-github.min.css"
cp "$hl/styles/github-dark.min.css" "$out/hljs-github-dark.min.css"
cp "$hl/LICENSE" "$out/LICENSE.highlightjs"
echo "vendored marked $MARKED, DOMPurify $DOMPURIFY, highlight.js $HIGHLIGHTJS into $out"
