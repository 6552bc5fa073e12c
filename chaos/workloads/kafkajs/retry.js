'use strict'
// The retry configuration every KafkaJS client of the workloads gets (conn.js), spelled out rather than left to
// KafkaJS's defaults (kafkajs/src/retry/defaults.js: the same values) because the watchdog (watch.js) bounds a call
// by its longest wait between attempts. Its number of retries is KafkaJS's own choice per client: 5, and no limit
// for an idempotent producer (kafkajs/src/producer/index.js:43).
const RETRY = Object.freeze({ maxRetryTime: 30 * 1000, initialRetryTime: 300, factor: 0.2, multiplier: 2 })

module.exports = { RETRY }
