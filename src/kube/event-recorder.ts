/**
 * What controllers need to report events: the interface only. The implementation that writes
 * aggregated events to the API lives in src/kube/events.ts; tests use RecordingEventRecorder.
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

export interface RecordedEvent {
  kind?: string;
  namespace?: string;
  name?: string;
  type: EventType;
  reason: string;
  message: string;
}

/** Keeps events in memory, for unit tests and dry runs. */
export class RecordingEventRecorder implements EventRecorder {
  readonly events: RecordedEvent[] = [];

  event(subject: EventSubject, type: EventType, reason: string, message: string): void {
    this.events.push({
      kind: subject.kind,
      namespace: subject.metadata?.namespace,
      name: subject.metadata?.name,
      type,
      reason,
      message,
    });
  }

  reasons(): string[] {
    return this.events.map((e) => e.reason);
  }
}
