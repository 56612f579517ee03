#!/usr/bin/env bash
# The fuzz corpora travel packed: 12,000-odd small files are 73 MiB unpacked
# and about 1 MiB as one xz archive (the inputs repeat a lot). Unpack before
# fuzzing or replaying, pack after `cargo fuzz cmin`.
#   harness/fuzz/corpus.sh unpack   # corpus.tar.xz -> harness/fuzz/corpus/
#   harness/fuzz/corpus.sh pack     # harness/fuzz/corpus/ -> corpus.tar.xz (byte-stable)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
archive="$here/corpus.tar.xz"
case "${1:-}" in
  unpack)
    tar -xJf "$archive" -C "$here"
    echo "unpacked $(find "$here/corpus" -type f | wc -l) inputs into $here/corpus"
    ;;
  pack)
    [ -d "$here/corpus" ] || { echo "no $here/corpus to pack (run: $0 unpack)" >&2; exit 2; }
    # Sorted names, zero times and owners: the same corpus packs to the same bytes.
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$here" -cf - corpus \
      | xz -9e -T1 >"$archive.tmp"
    mv "$archive.tmp" "$archive"
    echo "packed $(find "$here/corpus" -type f | wc -l) inputs into $archive ($(stat -c %s "$archive") bytes)"
    ;;
  *)
    echo "usage: $0 unpack|pack" >&2
    exit 2
    ;;
esac
