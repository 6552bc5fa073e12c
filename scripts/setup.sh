#!/usr/bin/env bash
# txnlab set-up: everything `make demo` and `make test` need, idempotent and cached.
# Each step checks first and does nothing when its result is already there; a failing step says
# what to do. Versions: versions.env (binaries, jars) and pyproject.toml (Python packages).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
set -a; source versions.env; set +a
TXNLAB_HOME=${TXNLAB_HOME:-$ROOT/.txnlab}
VENV=${VENV:-$ROOT/.venv}
WITH_TEST_TOOLS=${WITH_TEST_TOOLS:-0}
WITH_DOCKER=${WITH_DOCKER:-0}

step() { printf '\033[1;36m[setup]\033[0m %s\n' "$*"; }
fail() { printf '\033[1;31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif have sudo; then sudo "$@"; else return 1; fi; }
apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  have apt-get || fail "need Debian packages ${missing[*]} and there is no apt-get: install them by hand"
  step "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq || fail "apt-get update failed (are you root or a sudoer? is the Debian mirror reachable?)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]} failed"
}

# 1. toolchains this project builds with: Python >= 3.11, Java 17+, Maven, Go.
python3 -c "import sys; sys.exit(sys.version_info < (3, 11))" 2>/dev/null \
  || fail "Python >= ${PYTHON_MIN} is needed as python3"
have java || apt_install openjdk-17-jre-headless
have javac || apt_install openjdk-17-jdk-headless   # Maven compiles the streams workload's app (step 3)
java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])' || fail "Java 17 or newer is needed (java -version)"
have mvn || apt_install maven
have go || fail "Go is needed to build Toxiproxy and the franz-go workloads (https://go.dev/doc/install), then run make setup again"
have node && have npm || apt_install nodejs npm     # the KafkaJS workloads (chaos/workloads/kafkajs)

# 2. the Python virtualenv with every extra (.[all,test]), reinstalled only when pyproject.toml changes.
want=$(sha256sum pyproject.toml | cut -c1-16)
if ! stamp_ok "$VENV/.txnlab-stamp" "$want"; then
  step "python virtualenv in $VENV"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install -q --upgrade pip >/dev/null || fail "pip upgrade failed: is PyPI reachable?"
  "$VENV/bin/pip" install -q -e ".[all,test]" || fail "pip install failed: is PyPI reachable?"
  echo "$want" > "$VENV/.txnlab-stamp"
fi

# 3. Apache Kafka (broker + tools + Kafka Streams jars) and the Prometheus JMX agent from Maven Central, and the
#    streams workload's Kafka Streams app built against them (chaos/workloads/streams_app): the pinned release
#    (other releases of KAFKA_VERSIONS are assembled the same way on first use: cluster/lab/install.py); and Flink
#    for the flink workload: PyFlink (FLINK_VERSION) from PyPI in a virtualenv of its own under $TXNLAB_HOME/dist,
#    its Kafka connector jar from Maven Central; and the client workloads besides confluent-kafka (cluster/lab/clients.py):
#    franz-go's built with `go build` (Go module proxy), KafkaJS's installed with `npm ci` (npm).
"$VENV/bin/python" -m cluster.lab.install "$KAFKA_VERSION" \
  || fail "the Kafka $KAFKA_VERSION jars could not be assembled, the streams app built, Flink or the client workloads installed (above)"

# 3b. Spark's Kafka connector for the verification job (PySpark itself comes with the virtualenv).
SPARK_JARS="$TXNLAB_HOME/dist/spark-kafka-$SPARK_KAFKA_VERSION"
want=$(echo "$SPARK_KAFKA_VERSION $SPARK_TOKEN_PROVIDER_VERSION $SCALA_BINARY_VERSION" \
  | cat - spark_analysis/pom.xml | sha256sum | cut -c1-16)
if ! stamp_ok "$SPARK_JARS/.txnlab-stamp" "$want"; then
  step "Spark Kafka connector $SPARK_KAFKA_VERSION from Maven Central into $SPARK_JARS"
  rm -rf "$SPARK_JARS"; mkdir -p "$SPARK_JARS"
  mvn -q -B -f spark_analysis/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$SPARK_JARS" -Dspark.kafka.version="$SPARK_KAFKA_VERSION" \
    -Dspark.token.version="$SPARK_TOKEN_PROVIDER_VERSION" -Dscala.binary.version="$SCALA_BINARY_VERSION" \
    || fail "maven could not fetch Spark's Kafka connector: is Maven Central reachable? (mvn -f spark_analysis/pom.xml dependency:tree)"
  ls "$SPARK_JARS"/spark-sql-kafka-0-10_*.jar >/dev/null || fail "spark-sql-kafka jar missing after download"
  echo "$want" > "$SPARK_JARS/.txnlab-stamp"
fi

# 4. Toxiproxy server, built from the Go module proxy.
TOXI="$TXNLAB_HOME/bin/toxiproxy-server-$TOXIPROXY_VERSION"
if [ ! -x "$TOXI" ]; then
  step "toxiproxy-server $TOXIPROXY_VERSION (go install)"
  tmp=$(mktemp -d)
  GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
    || fail "go install of toxiproxy failed: is the Go module proxy reachable?"
  mkdir -p "$(dirname "$TOXI")"; mv "$tmp/server" "$TOXI"; rm -rf "$tmp"
fi

# 5. Prometheus and promtool: Debian's package.
have prometheus && have promtool || apt_install prometheus

# 6. the Docker engine for the compose stack (`make setup-docker`, and the tests): Debian's docker.io (dockerd
#    is started by `txnlab docker up` when none answers), docker-compose (v1) and debootstrap (the images' base
#    when no public registry is reachable: docs/docker.md). Test-only: Debian's chromium renders the demo report
#    to PNG headless (`python -m report.screenshot`).
if [ "$WITH_TEST_TOOLS" = 1 ] || [ "$WITH_DOCKER" = 1 ]; then
  [ -x /usr/sbin/dockerd ] || apt_install docker.io
  have docker-compose || apt_install docker-compose
  [ -x /usr/sbin/debootstrap ] || apt_install debootstrap
fi
if [ "$WITH_TEST_TOOLS" = 1 ]; then
  have chromium || apt_install chromium
fi
step "ready: Kafka $KAFKA_VERSION, toxiproxy $TOXIPROXY_VERSION, $(prometheus --version 2>&1 | head -1 | cut -d' ' -f1-3)"
