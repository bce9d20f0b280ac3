// Deliberately imports the test harness from production code.
import { FakeClock } from '@llmgw/testing';

export const broken = FakeClock;
