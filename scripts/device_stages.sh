# What the device scripts (device_io.sh, device_decode.sh) share, sourced after they set OUT,
# LOGS, BUDGET and STAGES: a summary of one line a stage, and stages with time limits that stop
# before the whole budget is spent.

SUMMARY=()
note() { SUMMARY+=("$(printf '%-11s %s' "$1" "$2")"); }
has() { [[ " $STAGES " == *" $1 "* ]]; }

# run_stage NAME SECONDS CMD...: CMD with a time limit (cut to what the budget has left), output
# to $LOGS/NAME.log; STAGE_RC and STAGE_S tell how it went.
run_stage() {
  local name=$1 limit=$2
  shift 2
  local left=$((BUDGET - SECONDS))
  if [ "$left" -lt 15 ]; then
    STAGE_RC=skipped STAGE_S=0
    echo "== $name: skipped, ${left}s of the ${BUDGET}s budget left" | tee "$LOGS/$name.log" >&2
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  echo "== $name (limit ${limit}s): $*" >&2
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  STAGE_RC=$?
  STAGE_S=$((SECONDS - t0))
  [ "$STAGE_RC" = 124 ] && echo "   (stopped at its ${limit}s limit)" >>"$LOGS/$name.log"
  return 0
}
