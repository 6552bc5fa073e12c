"""The reference workloads, on confluent-kafka (librdkafka): the transactional producer, the exactly-once
processor, what those two share (transactional.py), the observers and the producer-id storm."""
