/**
 * Hands out `slots` slots to jobs first come, first served. A job submitted while every slot is
 * busy waits in a FIFO queue (llama-server's "deferred" requests) until a slot is released.
 * Invariants: at most `slots` jobs hold a slot; a slot is held by one job at a time; a queued
 * job that is withdrawn never starts.
 */
export class SlotScheduler<J> {
  readonly #holders: Array<J | undefined>;
  readonly #queue: J[] = [];

  /** `start` runs synchronously when a job gets its slot (from submit or release). */
  constructor(
    slots: number,
    private readonly start: (job: J, slot: number) => void,
  ) {
    if (!Number.isInteger(slots) || slots < 1) throw new Error(`SlotScheduler: slots must be an integer >= 1 (got ${slots})`);
    this.#holders = new Array<J | undefined>(slots).fill(undefined);
  }

  /** Number of slots. */
  get size(): number {
    return this.#holders.length;
  }

  /** Jobs holding a slot now. */
  get processing(): number {
    return this.#holders.filter((j) => j !== undefined).length;
  }

  /** Jobs waiting for a slot now. */
  get deferred(): number {
    return this.#queue.length;
  }

  /** The job holding `slot`, if any. */
  holder(slot: number): J | undefined {
    return this.#holders[slot];
  }

  /** Starts `job` on the lowest free slot, or queues it behind the jobs already waiting. */
  submit(job: J): void {
    const free = this.#holders.indexOf(undefined);
    if (free >= 0 && this.#queue.length === 0) this.#assign(job, free);
    else this.#queue.push(job);
  }

  /** Removes a job that is still queued; false when it is not queued (running, done or unknown). */
  withdraw(job: J): boolean {
    const i = this.#queue.indexOf(job);
    if (i < 0) return false;
    this.#queue.splice(i, 1);
    return true;
  }

  /** Frees `slot` (held by `job`) and starts the oldest queued job on it. Releasing a slot `job` does not hold throws. */
  release(slot: number, job: J): void {
    if (this.#holders[slot] !== job) throw new Error(`SlotScheduler: slot ${slot} is not held by this job`);
    this.#holders[slot] = undefined;
    const next = this.#queue.shift();
    if (next !== undefined) this.#assign(next, slot);
  }

  /** Empties the queue and returns what was waiting (for shutdown or a failed engine). */
  drain(): J[] {
    return this.#queue.splice(0, this.#queue.length);
  }

  #assign(job: J, slot: number): void {
    this.#holders[slot] = job;
    this.start(job, slot);
  }
}
