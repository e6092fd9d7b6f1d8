#!/usr/bin/env bash
# build-kafka.sh - assemble a runnable KRaft Kafka broker from Maven Central into <repo>/.tools/kafka-<version>.
#
# Usage: scripts/build-kafka.sh [VERSION]      (default 4.3.1; prints the directory)
#
# On a real cluster the broker comes from Apache's release tarball (checked against its .sha512). Where only
# Maven Central is reachable, the broker is the runtime closure of the server modules below (~92 jars, ~55 MB)
# fetched with `mvn dependency:copy-dependencies`, every artifact checked against Central's checksum
# (--strict-checksums: a mismatch fails the build instead of warning). kafka-clients pulls slf4j 1.7, with
# which logging silently becomes a no-op: slf4j-api 2.0 and the log4j 2 binding are pinned beside it.
# Beside the broker it fetches the Prometheus JMX exporter javaagent (io.prometheus.jmx:jmx_prometheus_javaagent,
# a self-contained jar without dependencies; 1.0.1 is the only 1.x Central serves here) into agent/, which the
# kafka role runs as -javaagent (roles/kafka, kafka_jmx_exporter_jar_src).
# The result holds libs/, agent/ and SHA256SUMS (every jar of both); a later run with the same version only
# re-checks SHA256SUMS. Needs maven and a JRE 17 (apt-get install maven openjdk-17-jre-headless).
set -euo pipefail

version="${1:-4.3.1}"
log4j=2.25.3
slf4j=2.0.17
agent_version=1.0.1
here="$(cd "$(dirname "$0")/.." && pwd)"
dest="${here}/.tools/kafka-${version}"
agent_jar="agent/jmx_prometheus_javaagent-${agent_version}.jar"

# A directory built before the agent was added lacks it: build again.
if [[ -f "${dest}/SHA256SUMS" ]] && grep -q "  ${agent_jar}\$" "${dest}/SHA256SUMS" \
    && (cd "${dest}" && sha256sum --quiet -c SHA256SUMS); then
  echo "${dest}"
  exit 0
fi
command -v mvn >/dev/null || { echo "build-kafka.sh: maven is missing: apt-get install maven openjdk-17-jre-headless" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
deps=""
for artifact in kafka_2.13 kafka-server kafka-metadata kafka-raft kafka-storage kafka-group-coordinator \
                kafka-clients kafka-tools; do
  deps+="<dependency><groupId>org.apache.kafka</groupId><artifactId>${artifact}</artifactId>"
  deps+="<version>${version}</version></dependency>"
done
deps+="<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId>"
deps+="<version>${log4j}</version></dependency>"
deps+="<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId>"
deps+="<version>${log4j}</version></dependency>"
deps+="<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>${slf4j}</version></dependency>"
cat > "${work}/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>io.kiln</groupId><artifactId>kafka-broker</artifactId><version>${version}</version><packaging>pom</packaging>
<dependencies>${deps}</dependencies></project>
POM
mvn -q -B --strict-checksums -f "${work}/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
  -DoutputDirectory="${work}/libs" >&2
# dependency:copy copies the one artifact named, never its dependencies (the javaagent jar shades its own).
mvn -q -B --strict-checksums -f "${work}/pom.xml" dependency:copy \
  -Dartifact="io.prometheus.jmx:jmx_prometheus_javaagent:${agent_version}:jar" \
  -DoutputDirectory="${work}/agent" >&2
[[ -f "${work}/${agent_jar}" ]] || { echo "build-kafka.sh: maven did not produce ${agent_jar}" >&2; exit 1; }
rm -rf "${dest}"
mkdir -p "${dest}"
mv "${work}/libs" "${dest}/libs"
mv "${work}/agent" "${dest}/agent"
(cd "${dest}" && sha256sum libs/*.jar agent/*.jar > SHA256SUMS)
echo "${dest}"
