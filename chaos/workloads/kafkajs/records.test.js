'use strict'
// The ids as chaos/ids.py makes them: tests/unit/test_client_ids.py writes its vectors (from the Python reference)
// to $TXNLAB_ID_VECTORS and runs this file with `node --test`; without the variable there is nothing to compare.
const test = require('node:test')
const assert = require('node:assert')
const fs = require('node:fs')
const { attemptId, recordId, keyNumber, encodeValue, headers } = require('./records')

test('ids match the Python reference', (t) => {
  const path = process.env.TXNLAB_ID_VECTORS
  if (!path) return t.skip('TXNLAB_ID_VECTORS not set: run tests/unit/test_client_ids.py')
  const vectors = JSON.parse(fs.readFileSync(path, 'utf8'))
  assert.ok(vectors.length > 0, 'no vectors')
  for (const v of vectors) {
    const rid = recordId(v.run, v.process, v.attempt_no, v.index)
    const attempt = attemptId(v.run, v.process, v.attempt_no)
    assert.strictEqual(rid, v.record_id)
    assert.strictEqual(encodeValue(rid, attempt, v.process, v.input || null, v.size).toString(), v.value, `value of ${rid}`)
    assert.strictEqual(keyNumber(rid, v.keys), v.key_number, `key number of ${rid} mod ${v.keys}`)
    const got = {}
    for (const h of headersList(headers(rid, attempt, v.process, v.input || null))) got[h[0]] = String(h[1])
    assert.deepStrictEqual(got, v.headers, `headers of ${rid}`)
  }
})

// headers() may return an object (KafkaJS's form) or pairs: compare them as pairs either way.
function headersList (h) {
  return Array.isArray(h) ? h.map((x) => Array.isArray(x) ? x : [x.key, x.value]) : Object.entries(h)
}
