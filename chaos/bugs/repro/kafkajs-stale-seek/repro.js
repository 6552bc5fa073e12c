// A standalone reproduction of KafkaJS 2.2.4 applying a seek made before a rebalance after it: a partition given
// back to a consumer starts at that stale offset instead of the group's committed one, and records another member
// had processed and committed are delivered again.
//
// The story, with plain consumers of one group on a topic of one partition (no transactions: the seek map is the
// consumer's):
// 1. consumer A (client id "z-...") joins alone and is assigned the partition; in its first batch it calls
//    consumer.seek to the log start (what an exactly-once processor does after a transaction that did not commit:
//    back to the group's committed offsets, here none yet) and, before returning from eachBatch, consumer B
//    (client id "a-...") joins the group;
// 2. the rebalance gives the partition to B (KafkaJS's round-robin assigner sorts the member ids: B's first), so A
//    never fetches it and its seek stays pending;
// 3. B reads every record and commits the offset after the last one, then leaves the group;
// 4. the partition goes back to A. Expected (Kafka's Java consumer, librdkafka): A starts at the group's committed
//    offset, the end: it is given nothing. KafkaJS: its next fetch pops the pending seek and A reads the records B
//    had committed from the log start again.
//
// Usage: node repro.js --brokers 127.0.0.1:9092[,...] [--records 20] [--topic NAME] [--control]
// --control: the same steps without the seek (A is then given the partition back at the committed offset and reads
// nothing: what a consumer should do whatever seek came before the rebalance). It creates the topic (1 partition, replication factor min(3, brokers)). Exit 1: the symptom was seen (records
// below the committed offset delivered after the rebalance); 0: not seen; 2: the run itself failed.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback
}

const brokers = option('brokers', '127.0.0.1:9092').split(',')
const records = Number(option('records', '20'))
const stamp = Date.now()
const topic = option('topic', `kafkajs-stale-seek-${stamp}`)
const groupId = `${topic}-group`
const control = process.argv.includes('--control')
const TIMEOUT_MS = 60000

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function until(what, check, ms = TIMEOUT_MS) {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

function consumerOf(kafka) {
  return kafka.consumer({ groupId, sessionTimeout: 10000, rebalanceTimeout: 20000, heartbeatInterval: 1000,
                          maxWaitTimeInMs: 500 })
}

async function main() {
  const kafkaA = new Kafka({ clientId: `z-${stamp}`, brokers, logLevel: logLevel.NOTHING })
  const kafkaB = new Kafka({ clientId: `a-${stamp}`, brokers, logLevel: logLevel.NOTHING })
  const admin = kafkaA.admin()
  await admin.connect()
  const cluster = await admin.describeCluster()
  await admin.createTopics({
    topics: [{ topic, numPartitions: 1, replicationFactor: Math.min(3, cluster.brokers.length) }], waitForLeaders: true })
  const producer = kafkaA.producer()
  await producer.connect()
  await producer.send({ topic, messages: Array.from({ length: records }, (_, n) => ({ value: `record-${n}` })) })
  await producer.disconnect()
  console.log(`topic ${topic}: ${records} records at offsets 0-${records - 1}; group ${groupId}`)

  const a = consumerOf(kafkaA)
  const b = consumerOf(kafkaB)
  const state = { aJoins: 0, aAssigned: [], bDone: false, sought: false, afterComeback: [] }
  a.on(a.events.GROUP_JOIN, e => {
    state.aJoins++
    state.aAssigned.push((e.payload.memberAssignment[topic] || []).slice())
    console.log(`A joined (generation ${state.aJoins}): assigned partitions [${state.aAssigned.at(-1)}]`)
  })
  b.on(b.events.GROUP_JOIN, e => console.log(`B joined: assigned partitions [${e.payload.memberAssignment[topic] || []}]`))

  await a.connect()
  await a.subscribe({ topic, fromBeginning: true })
  await b.connect()
  await b.subscribe({ topic, fromBeginning: true })
  let startB
  await a.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      if (!state.sought) {
        // the rewind: back to where the group's committed offsets say (none: the log start), as a processor does
        // after a transaction that did not commit; then another member joins before this batch returns
        state.sought = true
        if (!control) {
          a.seek({ topic, partition: batch.partition, offset: '0' })
          console.log(`A: seek to offset 0 of partition ${batch.partition} (stored until A's next fetch of it)`)
        }
        startB = b.run({
          autoCommit: false,
          eachBatch: async ({ batch: got, resolveOffset }) => {
            for (const m of got.messages) resolveOffset(m.offset)
            const next = Number(got.messages.at(-1).offset) + 1
            await b.commitOffsets([{ topic, partition: got.partition, offset: String(next) }])
            if (next >= records) state.bDone = true
          },
        })
        await sleep(3000)              // B's JoinGroup is now waiting for A to rejoin: the rebalance follows
        return                         // nothing resolved: A's fetches of this batch are the seek's business
      }
      if (state.aJoins >= 3) {        // given the partition back after B left: what does A read?
        for (const m of batch.messages) state.afterComeback.push(Number(m.offset))
      }
    },
  })
  await startB
  await until('B to be assigned the partition and commit every record', () => state.bDone)
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  const at = Number(committed[0].partitions[0].offset)
  console.log(`B read every record and committed offset ${at}; B leaves the group`)
  if (state.aAssigned.length < 2 || state.aAssigned[1].length) {
    throw new Error(`the rebalance did not give the partition to B (A's assignments: ${JSON.stringify(state.aAssigned)})`)
  }
  await b.disconnect()
  await until('the partition to come back to A', () => state.aJoins >= 3 && state.aAssigned[2].length === 1)
  await sleep(5000)                   // A's fetches from wherever it starts
  await a.disconnect()
  await admin.disconnect()

  const again = state.afterComeback.filter(o => o < at)
  if (again.length) {
    console.log(`A was given the partition back and read offsets ${again[0]}-${again.at(-1)} again, below the ` +
                `committed offset ${at}`)
    console.log(`SYMPTOM: ${again.length} records the group had committed were delivered again after the rebalance ` +
                `(a seek made before it applied after it)`)
    return 1
  }
  console.log(`not seen: A was given the partition back and read ${state.afterComeback.length} records, none below ` +
              `the committed offset ${at}`)
  return 0
}

main().then(code => process.exit(code), err => {
  console.error(`the run failed: ${err && err.stack || err}`)
  process.exit(2)
})
