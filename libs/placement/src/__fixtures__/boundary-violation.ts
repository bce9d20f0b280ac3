// Deliberately breaks the pure-lib rules; linted by tools/scripts/boundaries.int.spec.ts, never imported.
import { DataSource } from 'typeorm';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { NestFactory } from '@nestjs/core';

export const broken = [DataSource, readFileSync, NestFactory, process.env.HOME, Date.now(), Math.random(), randomUUID(), crypto.getRandomValues(new Uint8Array(4)), setTimeout(() => undefined, 1)];
