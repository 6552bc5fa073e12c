// A standalone reproduction of KafkaJS 2.2.4's transactional producer failing every transaction for ever once the
// broker forgot its transactional id: AddPartitionsToTxn is answered INVALID_PRODUCER_ID_MAPPING, which KafkaJS takes
// as not retriable and never answers with a new InitProducerId; the abort sends nothing (no partition registered),
// so the next transaction uses the same producer id and fails the same way.
//
// 1. a transactional producer commits one transaction, then stays idle;
// 2. the broker forgets the transactional id (the script reads the broker's transactional.id.expiration.ms and its
//    cleanup interval and stays idle past both: KafkaJS's admin cannot describe a transaction);
// 3. the same producer begins --tries transactions, each with one record, aborting after a failed send as KafkaJS's
//    documentation shows: expected, a producer that initialises again (or says it cannot go on); KafkaJS: every one
//    fails INVALID_PRODUCER_ID_MAPPING;
// 4. the control: a new producer with the same transactional id commits at once.
//
// The cluster needs a short expiration (the default is 7 days), e.g. a broker started with
//   transactional.id.expiration.ms=10000
//   transaction.remove.expired.transaction.cleanup.interval.ms=500
// Usage: node repro.js --brokers 127.0.0.1:9092[,...] [--tries 5] [--expiry-timeout-s 60] [--topic NAME]
// Exit 1: the symptom was seen (every try failed INVALID_PRODUCER_ID_MAPPING and a new producer committed); 0: not
// seen; 2: the run itself failed (e.g. the id did not expire within the timeout: the broker's expiration is long).
'use strict'

const { Kafka, logLevel } = require('kafkajs')

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback
}

const brokers = option('brokers', '127.0.0.1:9092').split(',')
const tries = Number(option('tries', '5'))
const expiryTimeoutS = Number(option('expiry-timeout-s', '60'))
const stamp = Date.now()
const topic = option('topic', `kafkajs-expired-id-stuck-${stamp}`)
const transactionalId = `kafkajs-expired-id-stuck-${stamp}`

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function oneTransaction(producer, value) {
  const txn = await producer.transaction()
  try {
    await txn.send({ topic, messages: [{ value }] })
  } catch (err) {
    await txn.abort().catch(abortErr => console.log(`  abort: ${abortErr.message}`))
    throw err
  }
  await txn.commit()
}

async function main() {
  const kafka = new Kafka({ clientId: 'kafkajs-expired-id-stuck', brokers, logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const cluster = await admin.describeCluster()
  await admin.createTopics({
    topics: [{ topic, numPartitions: 1, replicationFactor: Math.min(3, cluster.brokers.length) }], waitForLeaders: true })
  const configs = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: 4, name: String(cluster.brokers[0].nodeId),
                  configNames: ['transactional.id.expiration.ms', 'transaction.remove.expired.transaction.cleanup.interval.ms'] }],
  })
  const setting = Object.fromEntries(configs.resources[0].configEntries.map(e => [e.configName, Number(e.configValue)]))
  await admin.disconnect()
  const expiration = setting['transactional.id.expiration.ms']
  const cleanup = setting['transaction.remove.expired.transaction.cleanup.interval.ms']
  console.log(`broker ${cluster.brokers[0].nodeId}: transactional.id.expiration.ms ${expiration}, ` +
              `transaction.remove.expired.transaction.cleanup.interval.ms ${cleanup}`)
  const waitMs = expiration + 2 * cleanup + 2000
  if (waitMs > expiryTimeoutS * 1000) {
    throw new Error(`the broker forgets an idle transactional id after ${expiration} ms: longer than --expiry-timeout-s ` +
                    `${expiryTimeoutS} (start the broker with a short transactional.id.expiration.ms)`)
  }

  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  await oneTransaction(producer, 'before-expiry')
  console.log(`producer ${transactionalId}: one transaction committed; idle ${waitMs} ms, past the expiration`)
  await sleep(waitMs)

  const errors = []
  for (let t = 0; t < tries; t++) {
    try {
      await oneTransaction(producer, `after-expiry-${t}`)
      console.log(`transaction ${t} after the expiry: committed`)
    } catch (err) {
      const type = err.type || err.name
      errors.push(type)
      console.log(`transaction ${t} after the expiry: failed ${type}: ${err.message}`)
    }
  }
  await producer.disconnect()

  const fresh = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  await fresh.connect()
  let control = 'committed'
  try {
    await oneTransaction(fresh, 'new-producer')
  } catch (err) {
    control = `failed ${err.type || err.name}: ${err.message}`
  }
  await fresh.disconnect()
  console.log(`control: a new producer with the same transactional id: ${control}`)

  if (errors.length === tries && errors.every(e => e === 'INVALID_PRODUCER_ID_MAPPING') && control === 'committed') {
    console.log(`SYMPTOM: all ${tries} transactions of the producer failed INVALID_PRODUCER_ID_MAPPING after its ` +
                `transactional id expired (never re-initialised); a new producer committed at once`)
    return 1
  }
  console.log(`not seen: ${errors.length} of ${tries} transactions failed (${errors.join(', ') || 'none'}); ` +
              `the new producer ${control}`)
  return 0
}

main().then(code => process.exit(code), err => {
  console.error(`the run failed: ${err && err.stack || err}`)
  process.exit(2)
})
