'use strict'
// Stalls (docs/workload-protocol.md "Stalls"): every client call runs under call(); one still pending at twice
// its own timeout (at least 5 s) is a stall: the open invoke completed as info, an `ok stall` recorded, the
// history flushed, exit 75, and the runner starts the process again. KafkaJS has no per-call deadline (no
// AbortSignal; its retries are counted, not timed), so this watchdog is the only bound on a call. A KafkaJS call
// retries on its own, each wait twice the last up to maxRetryTime (30 s; an idempotent producer's send without a
// limit on their number: kafkajs/src/producer/index.js:43), so a send across a leader's failover waits 8 s and
// more between its attempts: its own bound is twice the request timeout plus that longest wait (RETRY_WAIT_S,
// the retry configuration conn.js gives KafkaJS), never less. Time counts only while the process runs: each
// 250 ms tick ages the calls by at most 0.5 s, so a SIGSTOPped process does not age them. A pending promise has
// no stack of its own: a stall records where the call was made.

const { monotonicNs } = require('./history')
const { logf } = require('./log')
const { RETRY } = require('./retry')

const EXIT_STALL = 75
const STALL_FACTOR = 2.0
const STALL_FLOOR_S = 5.0
const TICK_MS = 250

const RETRY_WAIT_S = RETRY.maxRetryTime / 1000

const stallLimit = timeoutS => Math.max(STALL_FACTOR * timeoutS + RETRY_WAIT_S, STALL_FLOOR_S)

// clientInfo names the client as a stall records it: KafkaJS's version, from the installed package.
function clientInfo() {
  let version = 'unknown'
  try {
    version = require('kafkajs/package.json').version
  } catch (_) {}
  return { client: 'kafkajs', client_version: version, library: 'kafkajs', library_version: version }
}

class Watch {
  constructor(history) {
    this.history = history
    this.calls = new Map() // id -> {name, timeoutS, limitS, seconds, stack}
    this.next = 0
    this.timer = null
    this.last = 0n
  }

  // call runs fn() (a promise) as the client call `name` with its own timeout timeoutS, under the watchdog.
  async call(name, timeoutS, fn) {
    const id = this.next++
    const stack = (new Error().stack || '').split('\n').slice(2).map(line => line.trim())
    this.calls.set(id, { name, timeoutS, limitS: stallLimit(timeoutS), seconds: 0, stack })
    this.start()
    try {
      return await fn()
    } finally {
      this.calls.delete(id)
    }
  }

  start() {
    if (this.timer) return
    this.last = monotonicNs()
    this.timer = setInterval(() => this.tick(), TICK_MS)
    this.timer.unref() // the watchdog never keeps the process alive by itself
  }

  tick() {
    const now = monotonicNs()
    const step = Math.min(Number(now - this.last) / 1e9, (2 * TICK_MS) / 1000)
    this.last = now
    for (const c of this.calls.values()) {
      c.seconds += step
      if (c.seconds >= c.limitS) {
        this.stalled(c)
        return
      }
    }
  }

  stalled(c) {
    clearInterval(this.timer)
    const stall = {
      call: c.name, timeout_s: c.timeoutS, limit_s: c.limitS, seconds: Math.floor(c.seconds * 10) / 10,
      thread: 'main', stack: c.stack, ...clientInfo(),
    }
    this.history.stalled(stall)
    const others = [...this.calls.values()].filter(o => o !== c).map(o => `${o.name} (${o.seconds.toFixed(1)} s)`)
    logf(`stall: ${c.name} did not return in ${c.seconds.toFixed(1)} s; exiting ${EXIT_STALL}\n  called ` +
      `${c.stack.join('\n  ')}${others.length ? `\n  also pending: ${others.join(', ')}` : ''}`)
    this.history.close().then(() => process.exit(EXIT_STALL))
  }
}

module.exports = { Watch, clientInfo, stallLimit, EXIT_STALL }
