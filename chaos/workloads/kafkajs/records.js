'use strict'
// The ids every record carries (chaos/ids.py): record id "<attempt id>.<index>", attempt id
// "<run tag>.<process>.<attempt number>", in the value (compact JSON, padded to about --size bytes) and in
// headers; the key of a keyed record (CRC-32 of its id, as chaos/workloads/txn_producer.py key_number); the
// seeded random generator of a process (chaos/workloads/base.py seeds Python's from "<seed>/<process>").

const attemptId = (run, process, n) => `${run}.${process}.${n}`

const recordId = (run, process, n, index) => `${attemptId(run, process, n)}.${index}`

// CRC-32 (IEEE 802.3, zlib's crc32: reflected polynomial 0xEDB88320); Node 20 has no zlib.crc32.
const CRC_TABLE = (() => {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
})()

function crc32(text) {
  let crc = 0xffffffff
  for (const byte of Buffer.from(text, 'utf8')) crc = CRC_TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}

// keyNumber is txn_producer.py key_number: CRC-32 of the id, mod keys.
const keyNumber = (rid, keys) => crc32(rid) % keys

// encodeValue is chaos/ids.py encode_value: {"id","attempt","producer"[,"input"][,"pad"]}, compact, the pad
// making it about `size` bytes (pad = size - len(JSON without pad) - 9, when positive).
function encodeValue(rid, attempt, producer, input, size) {
  const body = { id: rid, attempt, producer }
  if (input != null) body.input = input
  const raw = JSON.stringify(body)
  const pad = size - raw.length - 9
  if (pad > 0) body.pad = 'x'.repeat(pad)
  return pad > 0 ? JSON.stringify(body) : raw
}

function headers(rid, attempt, producer, input) {
  const h = { 'txnlab.id': rid, 'txnlab.attempt': attempt, 'txnlab.producer': producer }
  if (input != null) h['txnlab.input'] = input
  return h
}

// idOf is the txnlab record id of a consumed KafkaJS message (its txnlab.id header; null without one), as
// chaos/workloads/observer.py record_id_of reads it.
function idOf(message) {
  let value = message.headers ? message.headers['txnlab.id'] : undefined
  if (Array.isArray(value)) value = value[0] // KafkaJS gives a repeated header as an array
  return value == null ? null : value.toString()
}

// A small seeded generator: FNV-1a (32 bit) of the seed text, then mulberry32.
function seededRandom(text) {
  let h = 0x811c9dc5
  for (const byte of Buffer.from(text, 'utf8')) h = Math.imul(h ^ byte, 0x01000193) >>> 0
  let state = h
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return { random, intn: n => Math.floor(random() * n) }
}

module.exports = { attemptId, recordId, crc32, keyNumber, encodeValue, headers, idOf, seededRandom }
