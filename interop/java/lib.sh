# Sourced by the scripts in interop/java (`. "$here/lib.sh"`): how they build and run a
# Java driver.
#
#   java_build NAME CLASS...    checks for javac (JDK 17+), fetches the Kafka jars
#                               (interop/kafka/fetch.sh: Maven Central, cached; sets $libs and
#                               $home, the cache dir), makes $build, a temp dir
#                               $home/interop-java/NAME.XXXXXX removed on exit, compiles
#                               src/CLASS.java of every CLASS into it with plain javac (a
#                               driver's shared classes, Checks and StreamsWordCount, are
#                               named too) and writes $build/log4j2.properties: client logging
#                               WARN and above to stderr (log4j2 through the slf4j binding in
#                               libs); a script appends its own loggers to it
#   java_run [--foreground] SECONDS HEAP CLASS ARG...
#                               runs CLASS with -XmxHEAP, that logging config and the jars
#                               under timeout (SECONDS, then KILL 10 s later; --foreground
#                               keeps java in the script's process group, so a test's killpg
#                               reaches it: timeout otherwise makes a group of its own)
java_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

java_build() {
  local name=$1 class sources=()
  shift
  command -v javac >/dev/null || { echo "FAIL: javac not found (JDK 17+ needed)"; exit 1; }
  libs="$("$java_dir/../kafka/fetch.sh" | tail -n 1)"
  home="$(dirname "$libs")"
  mkdir -p "$home/interop-java"
  build="$(mktemp -d "$home/interop-java/$name.XXXXXX")"
  trap 'rm -rf "$build"' EXIT
  for class in "$@"; do
    sources+=("$java_dir/src/$class.java")
  done
  javac -d "$build" -cp "$libs/*" -Xlint:all "${sources[@]}"
  cat >"$build/log4j2.properties" <<'LOG'
status = warn
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
LOG
}

java_run() {
  local foreground=()
  if [ "$1" = --foreground ]; then
    foreground=(--foreground)
    shift
  fi
  timeout ${foreground[@]+"${foreground[@]}"} -k 10 "$1" java "-Xmx$2" \
    "-Dlog4j2.configurationFile=file:$build/log4j2.properties" -cp "$build:$libs/*" "${@:3}"
}
