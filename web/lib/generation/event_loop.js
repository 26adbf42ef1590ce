// A turn of the event loop between a run's tokens, so that an abort (or a worker's cancel message) can arrive.
// Plain ES module.

let yieldChannel = null;
const yieldWaiters = [];

// A macrotask turn without setTimeout's 4 ms clamp: setImmediate in Node, a MessageChannel elsewhere.
export function yieldToEventLoop() {
  if (typeof setImmediate === 'function') return new Promise((resolve) => setImmediate(resolve));
  if (!yieldChannel) {
    yieldChannel = new MessageChannel();
    yieldChannel.port1.onmessage = () => yieldWaiters.shift()();
  }
  return new Promise((resolve) => {
    yieldWaiters.push(resolve);
    yieldChannel.port2.postMessage(null);
  });
}
