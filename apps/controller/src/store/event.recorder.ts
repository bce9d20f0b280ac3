import type { Clock } from '@llmgw/domain';
import type { EventRepository, NewEvent } from '@llmgw/store';
import type { Logger } from 'pino';

/** Records a cluster event without waiting; stamped now unless it says when it happened. */
export type RecordEvent = (event: NewEvent) => void;

/** Injection token of the controller's {@link RecordEvent}. */
export const RECORD_EVENT = Symbol('llmgw.controller.record-event');

/** A {@link RecordEvent} on the store: one that cannot take an event costs only that event (logged at debug). */
export function eventRecorder(events: Pick<EventRepository, 'record'>, clock: Clock, log: Logger): RecordEvent {
  return (e) => {
    events.record({ ...e, time: e.time ?? clock.now() }).catch((error: unknown) => log.debug({ err: error, kind: e.kind }, 'store: event not recorded'));
  };
}
