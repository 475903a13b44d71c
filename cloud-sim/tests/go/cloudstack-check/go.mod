// cloudstack-check: apache/cloudstack-go against cloud-sim's CloudStack API (tests/cloudstack_go.rs).
module cloudsim.local/cloudstack-check

go 1.23.0

require github.com/apache/cloudstack-go/v2 v2.19.0

require go.uber.org/mock v0.5.0 // indirect
