// Deliberately breaks the pure-lib rules in libs/control; linted by tools/scripts/boundaries.int.spec.ts, never imported.
import { Injectable } from '@nestjs/common';
import { ReplicaRepository } from '@llmgw/store';

export const broken = [Injectable, ReplicaRepository, setTimeout(() => undefined, 1), setInterval(() => undefined, 1_000), Math.random()];
