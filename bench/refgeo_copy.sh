# refgeo_copy.sh: sourced by the benches that outlive a session (an R2D2
# series, the islands benches). `refgeo_copy SRC DEST` copies the refgeo
# executable SRC to DEST on the first start; every later stage and resume runs
# DEST, so a bench resumed after a rebuild stays one program's (a resume state
# is only promised to read back into the program that wrote it). A copy finds
# refgeo's data/ through REFGEO_DATA, set to the source tree's ($ROOT/data).
refgeo_copy() {
  [ -x "$2" ] || cp "$1" "$2"
  export REFGEO_DATA=${REFGEO_DATA:-$ROOT/data}
}
