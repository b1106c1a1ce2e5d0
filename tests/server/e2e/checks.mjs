// Named checks for the e2e scripts: each outcome printed, failures counted into the exit status.
let failures = 0;

export async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
}

// Prints the tally and exits 1 when any check failed.
export function finish() {
  console.log(failures ? `${failures} check(s) failed` : "all checks passed");
  process.exit(failures ? 1 : 0);
}
