// Deliberately breaks the pure-lib rules; linted by tools/scripts/boundaries.spec.ts, never imported.
import { DataSource } from 'typeorm';
import { readFileSync } from 'node:fs';
import { NestFactory } from '@nestjs/core';

export const broken = [DataSource, readFileSync, NestFactory, process.env.HOME, Date.now(), Math.random()];
