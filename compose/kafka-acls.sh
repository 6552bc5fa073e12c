#!/bin/sh
# kafka-acls.sh in the Kafka image (compose/kafka.Dockerfile), for cluster/lab/security.py's ACL script: Kafka's
# AclCommand of the image's release (org.apache.kafka.tools since 4.0, kafka.admin before).
set -eu
case "$(cat /opt/kafka/VERSION)" in
  [0-3].*) main=kafka.admin.AclCommand ;;
  *) main=org.apache.kafka.tools.AclCommand ;;
esac
exec java -Xmx256m -cp '/opt/kafka/libs/*' "$main" "$@"
