// Throw-away module: HCCM's Robot client (hrobot-go, the version HCCM's go.mod requires) driven
// against cloud-sim's Robot webservice, to prove the sim's shapes and errors are what that client
// reads (cloud-sim/tests/hrobot_go.rs).
module testenv.local/hrobot-check

go 1.26.0

require github.com/syself/hrobot-go v0.2.5
