'use strict'
// The exactly-once processor (plan processor; chaos/workloads/processor.py is the reference), written the way
// KafkaJS's documentation shows it: a read_committed consumer in a group (consumer.run with eachBatch, no auto
// commit, no auto resolve) and a transactional producer of the same Kafka client; each run of at most --batch
// records of a fetched batch (one partition) is one transaction holding one output per input and the offsets
// (txn.sendOffsets), then commit. History: init, process invoke / ok (+ offsets) | fail | info, and `seek`
// observations where the consumer's reads start over: an assignment (GROUP_JOIN), a revocation (KafkaJS
// rebalances eagerly: a rejoin revokes the whole assignment) and the rewind after a transaction that did not
// commit (the group's committed offsets, consumer.seek).
//
// KafkaJS properties under test, not worked around:
// - txn.sendOffsets sends TxnOffsetCommit without the consumer's group generation or member id (eosManager
//   sendOffsets, eosManager/index.js:378-447: only transactionalId, producerId, producerEpoch, groupId, topics):
//   no KIP-447 fencing of a member the group has moved on from; and the consumer reads a partition's start with
//   OffsetFetch up to v4 (protocol/requests/offsetFetch), without require_stable. Duplicates after a rebalance
//   would be these properties' finding.
// - sendOffsets marks the offsets committed in the Kafka client's offset cache before the transaction commits
//   (producer/index.js:193-203, cluster markOffsetAsCommitted), which the consumer of the same client reads
//   (kafkajs/src/index.js: one offsets map for every client of a Kafka instance); a rewind seeks explicitly.
// - after eachBatch returns, the consumer fetches again from the last resolved offset (consumer/runner.js,
//   offsetManager nextOffset): an unresolved record is read again; a seek takes effect at the next fetch
//   (consumerGroup.js seekOffsets), and isStale() says one is pending.
// The consumer's fetch loop runs inside KafkaJS: it is not a call of this workload, and not under the watchdog.

const { newCtx } = require('./main')
const { newKafka, partitionCounts } = require('./conn')
const { attemptId, recordId, idOf } = require('./records')
const { txnArgs, TransactionalClient, describe, writeOf } = require('./txn')
const { logf, usage } = require('./log')

const REWIND_TRIES = 3 // reads of the committed offsets before a rewind gives up and rejoins the group
const REWIND_PAUSE_MS = 1000
const MAX_WAIT_MS = 500 // processor.py POLL_S: how long a fetch waits for records
const SESSION_TIMEOUT_MS = 10000
const REBALANCE_TIMEOUT_MS = 30000

const byPosition = (a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition)

class Processor extends TransactionalClient {
  constructor(ctx, t, kafka, opts) {
    super(ctx, t, kafka)
    Object.assign(this, opts) // inputs, output, group, batch
    this.attemptNo = ctx.firstAttempt
    this.outPartitions = 0
    this.consumer = null
    this.assignment = null // {topic: [partitions]} of the last GROUP_JOIN not yet revoked
    this.restart = null // why the consumer must leave and join again
  }

  seeked(reason, positions) {
    this.ctx.history.observe('seek', { isolation: 'read_committed', reason, positions: positions.sort(byPosition) })
  }

  positionsOf(assignment) {
    const positions = []
    for (const [topic, partitions] of Object.entries(assignment || {})) {
      for (const partition of partitions) positions.push({ topic, partition, offset: null })
    }
    return positions
  }

  revoked() {
    if (this.assignment) this.seeked('revoked', this.positionsOf(this.assignment))
    this.assignment = null
  }

  assigned(memberAssignment) {
    this.revoked() // a rejoin that no REBALANCING or CRASH announced (e.g. after stale metadata) revoked it too
    this.assignment = memberAssignment || {}
    this.seeked('assigned', this.positionsOf(this.assignment))
  }

  isAssigned(topic, partition) {
    return !!(this.assignment && (this.assignment[topic] || []).includes(partition))
  }

  async startConsumer() {
    const consumer = this.kafka.consumer({
      groupId: this.group, readUncommitted: false, sessionTimeout: SESSION_TIMEOUT_MS,
      rebalanceTimeout: REBALANCE_TIMEOUT_MS, heartbeatInterval: 3000, maxWaitTimeInMs: MAX_WAIT_MS,
      allowAutoTopicCreation: false,
    })
    const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events
    consumer.on(GROUP_JOIN, e => this.assigned(e.payload.memberAssignment))
    consumer.on(REBALANCING, () => this.revoked())
    consumer.on(CRASH, e => {
      logf(`consumer crashed (${e.payload.restart ? 'KafkaJS restarts it' : 'not restarted'}): ${describe(e.payload.error)}`)
      this.revoked()
      if (!e.payload.restart) this.requestRestart('the consumer crashed and KafkaJS does not restart it')
    })
    this.consumer = consumer
    try {
      await this.call('consumer_connect', 3 * this.t.requestS, async () => {
        await consumer.connect()
        await consumer.subscribe({ topics: this.inputs, fromBeginning: true })
      })
      // run() resolves once the consumer has joined the group (or crashed: its CRASH event says so).
      await this.call('consumer_run', REBALANCE_TIMEOUT_MS / 1000, () => consumer.run({
        autoCommit: false, eachBatchAutoResolve: false, partitionsConsumedConcurrently: 1,
        eachBatch: payload => this.eachBatch(payload),
      }))
    } catch (err) {
      logf(`consumer: ${describe(err)}`)
      this.requestRestart(`the consumer did not start: ${describe(err)}`)
    }
  }

  requestRestart(reason) {
    if (!this.restart) this.restart = reason
    this.ctx.wake()
  }

  async stopConsumer() {
    const consumer = this.consumer
    this.consumer = null
    if (consumer) {
      await this.call('close', this.t.requestS + REBALANCE_TIMEOUT_MS / 1000, () => consumer.disconnect())
        .catch(e => logf(`consumer close: ${describe(e)}`))
      this.revoked()
    }
  }

  // eachBatch: a fetched batch of one partition, in transactions of at most --batch records, one at a time
  // (partitionsConsumedConcurrently 1: KafkaJS's one worker calls eachBatch for one batch at a time).
  async eachBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }) {
    const messages = batch.messages
    for (let i = 0; i < messages.length; i += this.batch) {
      if (!isRunning() || isStale() || this.ctx.stopping() || this.restart) return
      if (!(await this.ensureProducer())) {
        await this.ctx.wait(1000)
        return // unresolved: KafkaJS fetches these records again
      }
      const chunk = messages.slice(i, i + this.batch)
      let committed
      try {
        committed = await this.process(batch.topic, batch.partition, chunk)
      } catch (err) {
        logf(`process: ${err && err.stack ? err.stack : err}`)
        throw err
      }
      if (!committed) return // rewound: the seek takes effect at the next fetch
      resolveOffset(chunk[chunk.length - 1].offset)
      await heartbeat() // a rebalance surfaces here as a thrown error: KafkaJS rejoins the group
    }
  }

  async process(topic, partition, chunk) {
    const attempt = attemptId(this.ctx.runTag, this.ctx.process, this.attemptNo)
    const inputs = chunk.map(m => ({ topic, partition, offset: Number(m.offset), id: idOf(m) }))
    const ws = inputs.map((input, n) => ({
      topic: this.output, partition: partition % this.outPartitions,
      id: recordId(this.ctx.runTag, this.ctx.process, this.attemptNo, n), input: input.id,
    }))
    this.attemptNo++
    const next = Math.max(...inputs.map(input => input.offset)) + 1
    const commitOffsets = [{ topic, partition, offset: next }]
    const value = { attempt, producer: this.ctx.process, txn_id: this.t.txnId, group: this.group, inputs,
      writes: ws.map(writeOf), commit_offsets: commitOffsets }
    this.ctx.history.invoke('process', value)
    const [outcome, extra] = await this.transact(attempt, ws, commitOffsets)
    this.ctx.history.complete(outcome, 'process', { ...value, ...extra })
    if (outcome !== 'ok') await this.rewind(commitOffsets)
    return outcome === 'ok'
  }

  // transact: transaction(), the outputs, sendOffsets (the group id only: see the header), commit; abort after
  // an error before the commit.
  async transact(attempt, ws, commitOffsets) {
    let txn
    try {
      txn = await this.call('begin_transaction', this.t.requestS, () => this.producer.transaction())
    } catch (err) {
      return ['fail', await this.dropAfter([err], { error: describe(err) })]
    }
    let offsets
    try {
      offsets = await this.produceAll(txn, attempt, ws)
      const topics = {}
      for (const o of commitOffsets) (topics[o.topic] = topics[o.topic] || []).push({ partition: o.partition, offset: String(o.offset) })
      await this.call('send_offsets_to_transaction', this.t.requestS, () => txn.sendOffsets({
        consumerGroupId: this.group,
        topics: Object.entries(topics).map(([topic, partitions]) => ({ topic, partitions })),
      }))
    } catch (err) {
      return this.abortAfter(txn, err)
    }
    return this.commit(txn, offsets)
  }

  // rewind: back to the group's committed offsets of the batch's partitions (admin fetchOffsets; the log start
  // when the group has none), recorded before the seek takes effect, as processor.py's rewind does. When they
  // cannot be read (REWIND_TRIES times) reading on would skip the aborted batch: the workload's own failure,
  // recorded (`workload-error`), and the consumer leaves the group and joins again.
  async rewind(commitOffsets) {
    const topics = [...new Set(commitOffsets.map(o => o.topic))]
    let committed
    for (let tries = 1; ; tries++) {
      try {
        committed = await this.call('committed', this.t.requestS, () => this.admin.fetchOffsets({ groupId: this.group, topics }))
        break
      } catch (err) {
        this.ctx.history.observe('rewind-error', { error: describe(err), attempt: tries })
        if (tries === REWIND_TRIES || (await this.ctx.wait(REWIND_PAUSE_MS))) {
          this.ctx.history.observe('workload-error', { error: `rewind failed: ${describe(err)}`, action: 'rejoin the group' })
          this.requestRestart('rewind failed')
          return
        }
      }
    }
    const at = new Map()
    for (const { topic, partitions } of committed) {
      for (const { partition, offset } of partitions) at.set(`${topic}|${partition}`, Number(offset))
    }
    const positions = []
    for (const { topic, partition } of commitOffsets) {
      if (!this.isAssigned(topic, partition)) continue
      const offset = at.get(`${topic}|${partition}`)
      positions.push({ topic, partition, offset: offset >= 0 ? offset : null })
    }
    // recorded once the seeks are stored (they take effect at the next fetch), and only those that were: a seek
    // that failed (the consumer between a crash and KafkaJS's restart of it, or being replaced) moves nothing
    const sought = []
    for (const position of positions) {
      const { topic, partition, offset } = position
      let to = offset
      if (to == null) {
        try {
          const low = await this.call('log_start', this.t.requestS, () => this.admin.fetchTopicOffsets(topic))
          to = Number((low.find(p => p.partition === partition) || { low: 0 }).low)
        } catch (err) {
          logf(`log start of ${topic}-${partition}: ${describe(err)}; seeking to 0`)
          to = 0
        }
      }
      if (!this.consumer) { // stopped for a restart: the next consumer starts at the group's committed offsets
        logf(`seek ${topic}-${partition}: no consumer (it is being replaced)`)
        continue
      }
      try {
        this.consumer.seek({ topic, partition, offset: String(to) })
        sought.push(position)
      } catch (err) {
        logf(`seek ${topic}-${partition}: ${describe(err)}`)
        this.requestRestart(`the rewind's seek failed: ${describe(err)}`)
      }
    }
    if (sought.length) this.seeked('rewind', sought)
  }
}

async function runProcessor(a) {
  // Every option is read before the history is touched: a bad one exits 2 before any operation.
  if (!a.list('--inputs').length || !a.str('--output')) usage('the following arguments are required: --inputs, --output')
  const t = txnArgs(a)
  const opts = { inputs: a.list('--inputs'), output: a.str('--output'), group: a.str('--group', `${a.str('--run-tag')}.eos`),
    batch: a.integer('--batch', 50) }
  if (opts.batch < 1) usage(`argument --batch: ${opts.batch}: at least 1`)
  const protocol = a.str('--group-protocol', 'classic')
  if (protocol !== 'classic') { // the spec's validation refuses it first (processor.py check_args)
    usage(`argument --group-protocol: ${protocol}: KafkaJS 2.2.4 has no KIP-848 consumer protocol (classic only)`)
  }
  const ctx = await newCtx(a)
  const kafka = newKafka(t.requestMs, `${ctx.runTag}.${ctx.process}`)
  const p = new Processor(ctx, t, kafka, opts)
  p.outPartitions = (await partitionCounts(ctx, [opts.output]))[opts.output]
  p.admin = kafka.admin()
  await p.call('admin_connect', 3 * t.requestS, () => p.admin.connect()).catch(e => logf(`admin: ${describe(e)}`))
  while (!ctx.stopping()) {
    if (!(await p.ensureProducer())) {
      await ctx.wait(1000)
      continue
    }
    if (!p.consumer) await p.startConsumer()
    if (!p.restart) await ctx.wait(Infinity) // the consumer works in eachBatch until stopped or a restart is asked
    if (p.restart && !ctx.stopping()) {
      logf(`restarting the consumer: ${p.restart}`)
      ctx.history.observe('consumer-restart', { reason: p.restart }) // a slow rejoin told from a stopped consumer
      await p.stopConsumer()
      p.restart = null
      await ctx.wait(1000)
    }
  }
  await p.stopConsumer() // waits for the transaction in flight (eachBatch) to end
  await p.drop()
  await p.call('close', t.requestS, () => p.admin.disconnect()).catch(e => logf(`admin close: ${describe(e)}`))
  await ctx.finish(0)
}

module.exports = { runProcessor }
