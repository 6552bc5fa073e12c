'use strict'
// The Kafka connection from TXNLAB_KAFKA_* variables (cluster/access/connection.py names them) as a KafkaJS client
// configuration, KafkaJS's log (to stderr, with times, at TXNLAB_CLIENT_LOG's level), and the topic facts a
// workload reads once at its start. Never prints a secret.

const fs = require('fs')
const { Kafka, logLevel: LEVEL } = require('kafkajs')
const { logf, stamp } = require('./log')
const { RETRY } = require('./retry')

const LIST_TIMEOUT_S = 30 // chaos/workloads/topics.py LIST_TIMEOUT_S

const env = name => process.env[`TXNLAB_KAFKA_${name}`] || ''

class ConnectionError extends Error {}

function readFile(variable) {
  try {
    return fs.readFileSync(env(variable))
  } catch (err) {
    throw new ConnectionError(`TXNLAB_KAFKA_${variable}: ${err.message}`)
  }
}

function sslConfig() {
  const ssl = { rejectUnauthorized: true }
  if (env('TLS_CA_FILE')) ssl.ca = [readFile('TLS_CA_FILE')]
  if (env('TLS_CERT_FILE') || env('TLS_KEY_FILE')) {
    ssl.cert = readFile('TLS_CERT_FILE')
    ssl.key = readFile('TLS_KEY_FILE')
    if (env('TLS_KEY_PASSWORD')) ssl.passphrase = env('TLS_KEY_PASSWORD')
  }
  if (env('TLS_VERIFY_HOSTNAME').toLowerCase() === 'false') {
    // Verify the chain against the CA, not the name (cluster/access/connection.py tls_verify_hostname=false).
    ssl.checkServerIdentity = () => undefined
  }
  return ssl
}

const MECHANISMS = { PLAIN: 'plain', 'SCRAM-SHA-256': 'scram-sha-256', 'SCRAM-SHA-512': 'scram-sha-512' }

function saslConfig() {
  const mechanism = MECHANISMS[env('SASL_MECHANISM')]
  if (!mechanism) {
    throw new ConnectionError(`TXNLAB_KAFKA_SASL_MECHANISM ${JSON.stringify(env('SASL_MECHANISM'))}: one of ` +
      'PLAIN, SCRAM-SHA-256, SCRAM-SHA-512')
  }
  let password = env('SASL_PASSWORD')
  if (!password && env('SASL_PASSWORD_FILE')) password = readFile('SASL_PASSWORD_FILE').toString().replace(/[\r\n]+$/, '')
  return { mechanism, username: env('SASL_USERNAME'), password }
}

// logLevel: KafkaJS's own log, into the process's log; errors unless TXNLAB_CLIENT_LOG says error, warn,
// info or debug.
function logLevel() {
  const level = { error: LEVEL.ERROR, warn: LEVEL.WARN, info: LEVEL.INFO, debug: LEVEL.DEBUG }
  return level[(process.env.TXNLAB_CLIENT_LOG || '').toLowerCase()] ?? LEVEL.ERROR
}

const LABELS = { [LEVEL.ERROR]: 'ERROR', [LEVEL.WARN]: 'WARN', [LEVEL.INFO]: 'INFO', [LEVEL.DEBUG]: 'DEBUG' }

// KafkaJS's log lines on stderr: time, level, [namespace] message, then the entry's other fields as JSON.
const logCreator = () => ({ namespace, level, log }) => {
  const { message, timestamp, logger, ...fields } = log
  const extra = Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : ''
  process.stderr.write(`${stamp()} kafkajs ${LABELS[level] || level} [${namespace}] ${message}${extra}\n`)
}

// kafkaConfig is the KafkaJS client configuration every workload client starts from; requestTimeoutMs bounds
// each request (KafkaJS's requestTimeout), never a whole call (its retries are its own). clientId names the
// process on the wire (`<run tag>.<process>`, as a hold-requests fault's `clients` pattern selects it) unless
// TXNLAB_KAFKA_CLIENT_ID says otherwise.
function kafkaConfig(requestTimeoutMs, clientId) {
  const bootstrap = env('BOOTSTRAP')
  if (!bootstrap) throw new ConnectionError('TXNLAB_KAFKA_BOOTSTRAP is not set')
  const config = {
    clientId: env('CLIENT_ID') || clientId || 'txnlab',
    brokers: bootstrap.split(',').map(b => b.trim()).filter(Boolean),
    logLevel: logLevel(),
    logCreator,
    retry: { ...RETRY },
  }
  if (requestTimeoutMs) config.requestTimeout = requestTimeoutMs
  const protocol = env('SECURITY_PROTOCOL') || 'PLAINTEXT'
  if (!['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'].includes(protocol)) {
    throw new ConnectionError(`TXNLAB_KAFKA_SECURITY_PROTOCOL ${JSON.stringify(protocol)}: one of PLAINTEXT, SSL, ` +
      'SASL_PLAINTEXT, SASL_SSL')
  }
  if (protocol === 'SSL' || protocol === 'SASL_SSL') config.ssl = sslConfig()
  if (protocol === 'SASL_PLAINTEXT' || protocol === 'SASL_SSL') config.sasl = saslConfig()
  return config
}

// newKafka is a KafkaJS client of the connection, or a message and exit 2 when the variables are wrong.
function newKafka(requestTimeoutMs, clientId) {
  try {
    return new Kafka(kafkaConfig(requestTimeoutMs, clientId))
  } catch (err) {
    if (!(err instanceof ConnectionError)) throw err
    process.stderr.write(`txnlab-kafkajs: error: ${err.message}\n`)
    process.exit(2)
  }
}

// partitionCounts reads the topics' partition counts once (Metadata, through an admin client that never
// creates a topic); a missing topic: a message and exit 1.
async function partitionCounts(ctx, topics) {
  const admin = newKafka(ctx.requestTimeoutMs, `${ctx.runTag}.${ctx.process}`).admin()
  const counts = {}
  let failure = null
  try {
    await ctx.watch.call('list_topics', LIST_TIMEOUT_S, async () => {
      await admin.connect()
      const { topics: found } = await admin.fetchTopicMetadata({ topics })
      for (const t of found) counts[t.name] = t.partitions.length
    })
  } catch (err) {
    failure = err
  }
  let missing = topics.filter(t => !counts[t])
  if (failure) { // KafkaJS fails the whole Metadata read for one unknown topic: name the missing ones if it can
    const listed = await ctx.watch.call('list_topics', LIST_TIMEOUT_S, () => admin.listTopics()).catch(() => null)
    if (listed) missing = topics.filter(t => !listed.includes(t))
  }
  await ctx.watch.call('close', LIST_TIMEOUT_S, () => admin.disconnect()).catch(() => {})
  if (failure || missing.length) {
    logf(`topics ${JSON.stringify(missing)} do not exist or could not be read (create them first, e.g. ` +
      `\`txnlab chaos workload\` does)${failure ? `: ${failure.name}: ${failure.message}` : ''}`)
    await ctx.history.close()
    process.exit(1)
  }
  return counts
}

module.exports = { kafkaConfig, newKafka, partitionCounts, LIST_TIMEOUT_S }
