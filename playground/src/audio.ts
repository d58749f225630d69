// Everything that makes or takes sound: the background "music" of change_bgm,
// the player of the answer's audio (data-pcm) and the microphone capture.
import { Store } from './store';

type AudioContextClass = typeof AudioContext;

function audioContextClass(): AudioContextClass {
  const Ctor =
    window.AudioContext ??
    (window as unknown as { webkitAudioContext?: AudioContextClass }).webkitAudioContext;
  if (!Ctor) throw new Error('Web Audio is not available in this browser');
  return Ctor;
}

// --- change_bgm: a quiet tone per track ------------------------------------------

/** Track number -> pitch. Any other track plays the first one's. */
const TRACK_HZ: Record<number, number> = { 1: 262, 2: 392 };

export type BgmState = { track: number | null; hz: number | null; audio: string };

export class BgmPlayer {
  readonly state = new Store<BgmState>({ track: null, hz: null, audio: 'none' });
  #ctx: AudioContext | undefined;
  #voice: { osc: OscillatorNode; lfo: OscillatorNode; gain: GainNode } | undefined;

  /** Plays `track` (replacing what plays): a soft sine with a slow pulse. */
  play(track: number): void {
    const ctx = (this.#ctx ??= new (audioContextClass())());
    // Created after the user's click on Send, so the page may start audio;
    // if the browser still holds it, the tone starts at the next gesture.
    void ctx.resume().catch(() => {});
    this.#stopVoice();
    const hz = TRACK_HZ[track] ?? TRACK_HZ[1];
    const osc = ctx.createOscillator();
    osc.type = 'sine';
    osc.frequency.value = hz;
    const gain = ctx.createGain();
    gain.gain.setValueAtTime(0, ctx.currentTime);
    gain.gain.linearRampToValueAtTime(0.04, ctx.currentTime + 0.3);
    // A 1 Hz pulse (+/- 0.02 on the gain) so it sounds less like a test signal.
    const lfo = ctx.createOscillator();
    lfo.frequency.value = track === 2 ? 2 : 1;
    const depth = ctx.createGain();
    depth.gain.value = 0.02;
    lfo.connect(depth).connect(gain.gain);
    osc.connect(gain).connect(ctx.destination);
    osc.start();
    lfo.start();
    this.#voice = { osc, lfo, gain };
    this.state.set({ track, hz, audio: ctx.state });
    ctx.onstatechange = () => this.state.set({ ...this.state.get(), audio: ctx.state });
  }

  stop(): void {
    this.#stopVoice();
    this.state.set({ track: null, hz: null, audio: this.#ctx?.state ?? 'none' });
  }

  #stopVoice(): void {
    if (!this.#voice || !this.#ctx) return;
    const { osc, lfo, gain } = this.#voice;
    const end = this.#ctx.currentTime + 0.15;
    gain.gain.cancelScheduledValues(this.#ctx.currentTime);
    gain.gain.setValueAtTime(gain.gain.value, this.#ctx.currentTime);
    gain.gain.linearRampToValueAtTime(0, end);
    osc.stop(end);
    lfo.stop(end);
    this.#voice = undefined;
  }
}

// --- data-pcm: the answer's audio, queued without gaps ------------------------------

export type PcmStats = {
  chunks: number;
  seconds: number;
  sampleRate: number | null;
  /** The playback AudioContext's state: none, suspended, running, closed. */
  audio: string;
};

function base64ToBytes(b64: string): Uint8Array {
  const binary = atob(b64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export class PcmPlayer {
  readonly stats = new Store<PcmStats>({ chunks: 0, seconds: 0, sampleRate: null, audio: 'none' });
  #ctx: AudioContext | undefined;
  #next = 0;
  #sources = new Set<AudioBufferSourceNode>();

  /** Call from a user gesture (a click) so the browser lets the context play. */
  unlock(): void {
    void this.#context().resume().catch(() => {});
  }

  /** Queues one chunk of PCM16 LE mono right after the previous one. */
  enqueue(chunk: { data: string; sampleRate?: number; mediaType?: string }): void {
    const rate =
      chunk.sampleRate ?? Number(/rate=(\d+)/.exec(chunk.mediaType ?? '')?.[1] ?? 24000);
    const bytes = base64ToBytes(chunk.data);
    const samples = Math.floor(bytes.length / 2);
    if (samples === 0) return;
    const view = new DataView(bytes.buffer, bytes.byteOffset, samples * 2);
    const ctx = this.#context();
    const buffer = ctx.createBuffer(1, samples, rate); // the context resamples on playback
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples; i++) channel[i] = view.getInt16(i * 2, true) / 32768;
    const source = ctx.createBufferSource();
    source.buffer = buffer;
    source.connect(ctx.destination);
    // Gap-free: each chunk starts where the previous one ends; after a pause
    // (or the first chunk) start 50 ms ahead so scheduling never lags.
    const start = Math.max(this.#next, ctx.currentTime + 0.05);
    source.start(start);
    this.#next = start + buffer.duration;
    this.#sources.add(source);
    source.onended = () => this.#sources.delete(source);
    const stats = this.stats.get();
    this.stats.set({
      chunks: stats.chunks + 1,
      seconds: stats.seconds + buffer.duration,
      sampleRate: rate,
      audio: ctx.state,
    });
  }

  /** Stops what is queued (e.g. the user pressed Stop). */
  flush(): void {
    for (const source of this.#sources) {
      try {
        source.stop();
      } catch {
        // not started yet
      }
    }
    this.#sources.clear();
    this.#next = 0;
  }

  close(): void {
    this.flush();
    void this.#ctx?.close().catch(() => {});
    this.#ctx = undefined;
  }

  #context(): AudioContext {
    if (!this.#ctx) {
      const ctx = new (audioContextClass())();
      ctx.onstatechange = () => this.stats.set({ ...this.stats.get(), audio: ctx.state });
      this.#ctx = ctx;
    }
    return this.#ctx;
  }
}

// --- microphone: 16 kHz PCM16 mono in ~100 ms frames ---------------------------------

export const MIC_SAMPLE_RATE = 16000;
const FRAME_SAMPLES = MIC_SAMPLE_RATE / 10; // 100 ms

// The AudioWorklet only copies the input out; resampling happens on the main thread. It is a
// file of the page's own origin (not a blob: URL), as the page's Content-Security-Policy asks.
const TAP_WORKLET_URL = new URL('./pcm-tap.worklet.js', import.meta.url).href;

/** Streaming downsampler: each output sample averages the input samples it covers. */
export class Downsampler {
  readonly #ratio: number;
  #carry = new Float32Array(0);
  #pos = 0;

  constructor(inRate: number, outRate: number) {
    this.#ratio = inRate / outRate;
  }

  process(input: Float32Array): Float32Array {
    const buf = new Float32Array(this.#carry.length + input.length);
    buf.set(this.#carry);
    buf.set(input, this.#carry.length);
    const ratio = this.#ratio;
    const out: number[] = [];
    let p = this.#pos;
    while (p + ratio <= buf.length) {
      const start = Math.floor(p);
      const end = Math.max(start + 1, Math.floor(p + ratio));
      let sum = 0;
      for (let i = start; i < end; i++) sum += buf[i];
      out.push(sum / (end - start));
      p += ratio;
    }
    const consumed = Math.floor(p);
    this.#carry = buf.slice(consumed);
    this.#pos = p - consumed;
    return Float32Array.from(out);
  }
}

function toPcm16(samples: Float32Array): Uint8Array {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(i * 2, Math.round(s < 0 ? s * 0x8000 : s * 0x7fff), true);
  }
  return bytes;
}

/**
 * The microphone, as 100 ms frames of 16 kHz PCM16 LE mono handed to `onFrame`.
 * `stop()` hands over the last, shorter frame and releases the device.
 */
export class MicCapture {
  readonly inputRate: number;
  readonly method: 'audio-worklet' | 'script-processor';
  #ctx: AudioContext;
  #stream: MediaStream;
  #nodes: AudioNode[];
  #downsampler: Downsampler;
  #pending: number[] = [];
  #onFrame: (pcm16: Uint8Array) => void;
  #stopped = false;

  private constructor(
    ctx: AudioContext,
    stream: MediaStream,
    nodes: AudioNode[],
    method: MicCapture['method'],
    onFrame: (pcm16: Uint8Array) => void,
  ) {
    this.#ctx = ctx;
    this.#stream = stream;
    this.#nodes = nodes;
    this.method = method;
    this.inputRate = ctx.sampleRate;
    this.#downsampler = new Downsampler(ctx.sampleRate, MIC_SAMPLE_RATE);
    this.#onFrame = onFrame;
  }

  static async start(onFrame: (pcm16: Uint8Array) => void): Promise<MicCapture> {
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new Error('No microphone access here (the page needs https or localhost)');
    }
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true },
    });
    const ctx = new (audioContextClass())();
    try {
      await ctx.resume();
      const source = ctx.createMediaStreamSource(stream);
      const mute = ctx.createGain(); // keeps the tap pulled by the graph, silently
      mute.gain.value = 0;
      mute.connect(ctx.destination);
      let capture: MicCapture;
      if (ctx.audioWorklet) {
        await ctx.audioWorklet.addModule(TAP_WORKLET_URL);
        const tap = new AudioWorkletNode(ctx, 'pcm-tap', {
          numberOfInputs: 1,
          numberOfOutputs: 1,
          channelCount: 1,
          channelCountMode: 'explicit',
        });
        capture = new MicCapture(ctx, stream, [source, tap, mute], 'audio-worklet', onFrame);
        tap.port.onmessage = (event: MessageEvent<Float32Array>) => capture.#take(event.data);
        source.connect(tap).connect(mute);
      } else {
        // Older browsers: the deprecated ScriptProcessorNode does the same job.
        const processor = ctx.createScriptProcessor(4096, 1, 1);
        capture = new MicCapture(ctx, stream, [source, processor, mute], 'script-processor', onFrame);
        processor.onaudioprocess = event =>
          capture.#take(event.inputBuffer.getChannelData(0).slice(0));
        source.connect(processor).connect(mute);
      }
      return capture;
    } catch (error) {
      stream.getTracks().forEach(track => track.stop());
      void ctx.close();
      throw error;
    }
  }

  #take(samples: Float32Array): void {
    if (this.#stopped) return;
    const resampled = this.#downsampler.process(samples);
    for (let i = 0; i < resampled.length; i++) this.#pending.push(resampled[i]);
    while (this.#pending.length >= FRAME_SAMPLES) {
      this.#onFrame(toPcm16(Float32Array.from(this.#pending.splice(0, FRAME_SAMPLES))));
    }
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#pending.length > 0) this.#onFrame(toPcm16(Float32Array.from(this.#pending)));
    this.#pending = [];
    for (const node of this.#nodes) node.disconnect();
    this.#stream.getTracks().forEach(track => track.stop());
    void this.#ctx.close().catch(() => {});
  }
}
