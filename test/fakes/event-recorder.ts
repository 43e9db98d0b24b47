import type { EventRecorder, EventSubject, EventType } from '../../src/kube/event-recorder.ts';

export interface RecordedEvent {
  kind?: string;
  namespace?: string;
  name?: string;
  type: EventType;
  reason: string;
  message: string;
}

/** Keeps events in memory, for unit tests. */
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
