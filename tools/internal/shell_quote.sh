# shell_quote ARG...: prints the arguments as one line a user can paste into a POSIX shell and
# get the same arguments back. Plain words stay as they are; anything else is single-quoted
# (an embedded ' becomes '\''). Sourced by tools/demo, which echoes each command it runs.
shell_quote() {
  local out=() arg
  for arg in "$@"; do
    if [[ -n "$arg" && "$arg" =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then
      out+=("$arg")
    else
      out+=("'${arg//\'/\'\\\'\'}'")
    fi
  done
  printf '%s\n' "${out[*]}"
}
