/**
 * What controllers need to report events: the interface only. The implementation that writes
 * aggregated events to the API lives in src/kube/events.ts; tests use test/fakes/event-recorder.ts.
 */
export type EventType = 'Normal' | 'Warning';

/** The object an event is about; a Node or Service (plain JSON) satisfies it. */
export interface EventSubject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export interface EventRecorder {
  event(subject: EventSubject, type: EventType, reason: string, message: string): void;
}
