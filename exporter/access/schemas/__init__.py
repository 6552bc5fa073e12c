"""Wire schemas of the requests kafka-python 3.0 does not carry, in its JSON schema form (exporter/access/groups.py
builds message classes from them). Written from the protocol's published message definitions; only versions whose
wire format no later Kafka release changes.
Owns: ConsumerGroupDescribe v0 (KIP-848, API key 69).
Must not: hold code.
"""
