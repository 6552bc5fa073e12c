'use strict'
// The watchdog's bound on a KafkaJS call (watch.js): run by tests/unit/test_stalls.py with `node --test`.
const test = require('node:test')
const assert = require('node:assert')
const { RETRY } = require('./retry')
const { stallLimit } = require('./watch')

test('a call is a stall only past twice its request timeout plus KafkaJS\'s longest wait between retries', () => {
  assert.strictEqual(RETRY.maxRetryTime, 30000)
  assert.strictEqual(stallLimit(5), 40)            // a processor's send (--request-timeout-s 5)
  assert.strictEqual(stallLimit(10), 50)           // the default request timeout
  // a send retrying across a leader's failover, as KafkaJS 2.2.4 did in the campaign (attempts after 0.6, 1.5,
  // 3.5 and 7.9 s: 13.5 s in all) is not one
  assert.ok(stallLimit(5) > 0.644 + 1.528 + 3.514 + 7.898)
})
