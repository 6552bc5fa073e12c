'use strict'
// What the two transactional roles share (chaos/workloads/transactional.py is the reference): their options,
// the transactional producer and its `init`, producing a transaction's writes with their ids and learning their
// offsets, and what an error means for the outcome: `ok` only for an acknowledged commit, `fail` when the
// transaction certainly did not commit, `info` when its outcome is unknown; a producer in an unknown state is
// dropped (the next one's InitProducerId fences it and aborts what it left), and a fenced one exits with
// --on-fenced exit. What KafkaJS does on its own (its retries, its transaction state machine) is its behaviour
// under test, never worked around.
//
// How KafkaJS 2.2.4 maps onto the protocol (kafkajs/src/producer, read for this):
// - init: KafkaJS has no initTransactions. producer.connect() of an idempotent producer asks a non-transactional
//   producer id of its own (producer/index.js:223-225, eosManager initProducerId without a transactional id,
//   eosManager/index.js:152-158); the transactional InitProducerId (the one that fences an earlier producer of
//   the id and aborts its open transaction) is sent lazily by the first producer.transaction()
//   (producer/index.js:136-139, "We only initialize the producer id once"). So `init` covers connect(), the first
//   transaction() and the abort of that empty transaction, which sends nothing (eosManager/index.js:317-321:
//   no partitions or offsets registered, no EndTxn).
// - a commit that fails cannot be retried: eosManager.commit moves to COMMITTING before its EndTxn and back to
//   READY only on success (eosManager/index.js:290, 307), and the transaction object refuses every call once
//   its manager is not TRANSACTING (producer/index.js:152-159). The rule's one retry of a retriable commit error
//   is made all the same and KafkaJS's answer recorded (`after` keeps the commit's own error).
// - fenced: KafkaJS 2.2.4 knows INVALID_PRODUCER_EPOCH (47) but not PRODUCER_FENCED (90), which it reports as
//   KAFKAJS_UNKNOWN_ERROR_CODE "Unknown error code 90" (protocol/error.js unknownErrorCode); its retrier wraps
//   errors in KafkaJSNonRetriableError / KafkaJSNumberOfRetriesExceeded with the original as `cause`
//   (retry/index.js:51,55): fenced() looks down that chain.

const { logf, usage } = require('./log')
const { encodeValue, headers } = require('./records')

const FENCED_TYPES = new Set(['PRODUCER_FENCED', 'INVALID_PRODUCER_EPOCH'])
const FENCED_CODES = new Set([47, 90])

function txnArgs(a) {
  const t = {
    timeoutMs: a.integer('--transaction-timeout-ms', 10000),
    requestS: a.num('--request-timeout-s', 10),
    txnId: a.str('--txn-id', `${a.str('--run-tag')}.${a.str('--process')}`),
    size: a.integer('--size', 100),
    onFencedExit: false,
  }
  t.requestMs = Math.round(t.requestS * 1000)
  const onFenced = a.str('--on-fenced', 'reinit')
  if (onFenced === 'exit') t.onFencedExit = true
  else if (onFenced !== 'reinit') usage(`argument --on-fenced: invalid choice: '${onFenced}' (choose from 'reinit', 'exit')`)
  return t
}

// chain is the error and its causes, outermost first.
function chain(err) {
  const out = []
  for (let e = err; e && out.length < 10 && !out.includes(e); e = e.cause) out.push(e)
  return out
}

// describe is the error's text for the history: name, protocol error type, message, and a cause that says more.
function describe(err) {
  if (!(err instanceof Error)) return String(err)
  const text = e => `${e.name}${e.type ? ` ${e.type}` : ''}: ${e.message}`
  let out = text(err)
  for (const cause of chain(err).slice(1)) {
    if (text(cause) !== out && !out.includes(cause.message)) out += ` (cause: ${text(cause)})`
    else if (cause.type && !out.includes(cause.type)) out += ` (cause: ${cause.type})`
  }
  return out
}

// fenced: our epoch is stale (another producer with our transactional id initialised, or the coordinator
// bumped it when it aborted our timed-out transaction).
function fenced(err) {
  return chain(err).some(e => FENCED_TYPES.has(e.type) || FENCED_CODES.has(e.code) ||
    (e.type === 'KAFKAJS_UNKNOWN_ERROR_CODE' && /Unknown error code 90\b/.test(e.message || '')))
}

const retriable = err => err instanceof Error && err.retriable === true

// A manual partitioner: every message names its partition (as franz-go's ManualPartitioner), and KafkaJS does
// not warn about its default partitioner.
const manualPartitioner = () => ({ message }) => message.partition

const writeOf = w => {
  const m = { topic: w.topic, partition: w.partition, id: w.id }
  if (w.key != null) m.key = w.key
  if (w.input !== undefined) m.input = w.input
  return m
}

class TransactionalClient {
  constructor(ctx, t, kafka) {
    this.ctx = ctx
    this.t = t
    this.kafka = kafka
    this.producer = null
  }

  call(name, timeoutS, fn) {
    return this.ctx.watch.call(name, timeoutS, fn)
  }

  // ensureProducer makes the transactional producer and its producer id (see the header: init), recorded as `init`.
  async ensureProducer() {
    if (this.producer) return true
    const h = this.ctx.history
    h.invoke('init', { txn_id: this.t.txnId })
    const producer = this.kafka.producer({
      transactionalId: this.t.txnId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: this.t.timeoutMs,
      allowAutoTopicCreation: false, createPartitioner: manualPartitioner,
    })
    try {
      await this.call('init_transactions', 3 * this.t.requestS, async () => {
        await producer.connect()
        const empty = await producer.transaction() // the transactional InitProducerId
        await empty.abort() // nothing registered: local only
      })
    } catch (err) {
      await this.call('close', this.t.requestS, () => producer.disconnect()).catch(e => logf(`close: ${describe(e)}`))
      h.complete('fail', 'init', { txn_id: this.t.txnId, error: describe(err) })
      return false
    }
    this.producer = producer
    h.complete('ok', 'init', { txn_id: this.t.txnId })
    return true
  }

  // produceAll sends the writes in the open transaction, one txn.send per topic (in the order of their first
  // write), and returns the offset of each write: its partition's baseOffset in the send's RecordMetadata plus
  // its index among that send's writes to the partition. A write KafkaJS resolved without acknowledging (no
  // metadata for its partition, or an error code) is an error before the commit: the outcome cannot be `ok`
  // without its offset.
  async produceAll(txn, attempt, ws) {
    const offsets = new Array(ws.length).fill(-1)
    const byTopic = new Map()
    ws.forEach((w, i) => {
      if (!byTopic.has(w.topic)) byTopic.set(w.topic, [])
      byTopic.get(w.topic).push(i)
    })
    const unacknowledged = []
    for (const [topic, indexes] of byTopic) {
      const messages = indexes.map(i => {
        const w = ws[i]
        return { partition: w.partition, key: w.key == null ? null : w.key, headers: headersOf(this.ctx, attempt, w),
          value: valueOf(this.ctx, this.t, attempt, w) }
      })
      const metadata = await this.call('send', this.t.requestS,
        () => txn.send({ topic, messages, acks: -1, timeout: this.t.requestMs }))
      const base = new Map()
      for (const m of metadata || []) {
        if (m.topicName !== topic) continue
        if (base.has(m.partition)) base.set(m.partition, null) // twice: trust neither
        else base.set(m.partition, m.errorCode === 0 || m.errorCode == null ? Number(m.baseOffset) : null)
      }
      const seen = new Map()
      for (const i of indexes) {
        const p = ws[i].partition
        const k = seen.get(p) || 0
        seen.set(p, k + 1)
        const b = base.get(p)
        if (b == null || !Number.isFinite(b) || b < 0) unacknowledged.push(ws[i].id)
        else offsets[i] = b + k
      }
      if (base.size !== seen.size) logf(`send to ${topic}: metadata for ${base.size} partitions, ${seen.size} written`)
    }
    if (unacknowledged.length) {
      const err = new Error(`KafkaJS resolved send() without acknowledging ${unacknowledged.length} write(s): ` +
        unacknowledged.slice(0, 5).join(', '))
      err.name = 'UnacknowledgedWrites'
      logf(err.message)
      throw err
    }
    return offsets
  }

  // commit ends the transaction with a commit (transactional.py's rule): ok with the offsets; a retriable error
  // is retried once (see the header: KafkaJS refuses the retry); else info, and the producer dropped.
  async commit(txn, offsets) {
    try {
      await this.call('commit_transaction', 2 * this.t.requestS, () => txn.commit())
      return ['ok', { offsets }]
    } catch (err) {
      if (!fenced(err) && retriable(err)) {
        try {
          await this.call('commit_transaction', 2 * this.t.requestS, () => txn.commit())
          return ['ok', { offsets, retried: describe(err) }]
        } catch (again) {
          return ['info', await this.dropAfter([again, err], { error: describe(again), after: describe(err) })]
        }
      }
      return ['info', await this.dropAfter([err], { error: describe(err) })]
    }
  }

  // abortDeliberately: a planned abort; one that fails drops the producer.
  async abortDeliberately(txn) {
    try {
      await this.call('abort_transaction', 2 * this.t.requestS, () => txn.abort())
    } catch (err) {
      return ['fail', await this.dropAfter([err], { error: describe(err), after: 'deliberate abort' })]
    }
    return ['fail', { error: 'deliberate abort' }]
  }

  // abortAfter aborts the open transaction after err (nothing was asked to commit): `fail`; an abort that fails
  // too is judged by its own error (a paused zombie learns here that it is fenced) and drops the producer. A
  // fenced producer is dropped without an abort (transactional.py): KafkaJS would "abort" locally, sending
  // nothing when the fencing came from the transaction's first AddPartitionsToTxn (eosManager/index.js:317-321),
  // and carry on with its stale epoch.
  async abortAfter(txn, err) {
    if (fenced(err)) return ['fail', await this.dropAfter([err], { error: describe(err) })]
    try {
      await this.call('abort_transaction', 2 * this.t.requestS, () => txn.abort())
    } catch (abortErr) {
      return ['fail', await this.dropAfter([abortErr, err], { error: describe(abortErr), after: describe(err) })]
    }
    return ['fail', { error: describe(err) }]
  }

  // dropAfter disconnects the producer after errs; a fenced producer with --on-fenced exit stops the process.
  async dropAfter(errs, extra) {
    await this.drop()
    if (this.t.onFencedExit && errs.some(fenced)) {
      extra.fenced = true
      this.ctx.stop()
    }
    return extra
  }

  async drop() {
    const producer = this.producer
    this.producer = null
    if (producer) {
      await this.call('close', this.t.requestS, () => producer.disconnect()).catch(e => logf(`close: ${describe(e)}`))
    }
  }
}

// A processor's output carries its input's id (value field `input`, header `txnlab.input`) when it has one.
const headersOf = (ctx, attempt, w) => headers(w.id, attempt, ctx.process, w.input == null ? undefined : w.input)

const valueOf = (ctx, t, attempt, w) =>
  encodeValue(w.id, attempt, ctx.process, w.input == null ? undefined : w.input, t.size)

module.exports = { txnArgs, TransactionalClient, describe, fenced, retriable, writeOf }
