"""What the cluster is set to: the brokers' configs that set the exporter's thresholds, and the cluster's
finalized feature levels.

Owns: DescribeConfigs of the named configs (THRESHOLD_CONFIGS by default) on every broker at once (each
broker's error kept as an ItemError), and the finalized features of ApiVersions v3+ (kafka-python's
describe_features), both on the background lane.
Must not: interpret a value (its callers do: collectors.py, service.py, txn_commands.py) or change any setting.
"""
from __future__ import annotations

from typing import Iterable

from kafka.protocol.admin.configs import DescribeConfigsRequest

from exporter.access.lanes import AdminLanes
from exporter.access.metadata import MetadataCache
from exporter.access.results import ConfigsResult, FeaturesResult, ItemError, error_name, item_error

BROKER_RESOURCE = 4                   # DescribeConfigs resource type of a broker
THRESHOLD_CONFIGS = ("transaction.max.timeout.ms", "producer.id.expiration.ms",
                     "transactional.id.expiration.ms", "transaction.partition.verification.enable")


class ClusterSettings:
    """Broker configs and finalized features, as the brokers report them."""

    def __init__(self, lanes: AdminLanes, cache: MetadataCache):
        self.lanes = lanes
        self.cache = cache

    # ---- broker configs (background) --------------------------------------------------------------
    def broker_configs(self, names: Iterable[str] = THRESHOLD_CONFIGS) -> ConfigsResult:
        meta = self.cache.metadata()
        result = ConfigsResult()
        self.lanes.run(self._describe_configs, list(meta.brokers), list(names), result)
        return result

    async def _describe_configs(self, m, brokers: list[int], names: list[str], result: ConfigsResult) -> None:
        resource = DescribeConfigsRequest.DescribeConfigsResource
        sends = [(b, self.lanes.send(m, DescribeConfigsRequest(
            resources=[resource(resource_type=BROKER_RESOURCE, resource_name=str(b), configuration_keys=names)],
            include_synonyms=False, include_documentation=False), b)) for b in brokers]
        for broker, response, exc in await self.lanes.gather(m, sends):
            if exc is not None:
                result.errors.append(ItemError(error_name(exc), broker=broker, whole_request=True))
                continue
            for res in response.results:
                err = item_error(res.error_code)
                if err:
                    result.errors.append(ItemError(err, broker=broker))
                else:
                    result.configs[broker] = {c.name: c.value for c in res.configs if c.value is not None}

    # ---- cluster features (background) ----------------------------------------------------------------
    def finalized_features(self) -> FeaturesResult:
        """The cluster's finalized feature levels (KIP-584; transaction.version 2 is KIP-890 part 2) as a
        broker reports them in ApiVersions v3+ (kafka-python's describe_features). A feature the broker
        supports but the cluster has not finalized is level 0, as kafka-features.sh describe prints it.
        Raises when the request fails."""
        admin = self.lanes.lease()
        try:
            described = admin.describe_features()
        finally:
            self.lanes.release(admin)
        return FeaturesResult({name: levels.get("finalized", (0, 0))[1] for name, levels in described.items()})
