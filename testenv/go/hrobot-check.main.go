// hrobot-check calls the Robot webservice at $HROBOT_ENDPOINT with hrobot-go, the client HCCM
// uses, exactly as HCCM builds it (basic auth, SetBaseURL), and prints one JSON line per operation:
//
//	list         ServerGetList()
//	get:<n>      ServerGet(n)
//	reset:<n>    ResetGet(n)
//
// A line is {"op": ..., "result": <what hrobot-go parsed, marshalled back>} or {"op": ...,
// "error": <err.Error()>, "code": <the API error code, if hrobot-go parsed one>, "not_found":
// ..., "rate_limited": ..., "unauthorized": ...}, the checks HCCM makes with models.IsError.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	hrobot "github.com/syself/hrobot-go"
	"github.com/syself/hrobot-go/models"
)

func main() {
	client := hrobot.NewBasicAuthClientWithCustomHttpClient(
		os.Getenv("HROBOT_USER"), os.Getenv("HROBOT_PASSWORD"),
		&http.Client{Timeout: 10 * time.Second},
	)
	client.SetBaseURL(os.Getenv("HROBOT_ENDPOINT"))
	client.SetUserAgent("hcloud-cloud-controller-manager/hrobot-check")
	out := json.NewEncoder(os.Stdout)
	for _, op := range os.Args[1:] {
		name, arg, _ := strings.Cut(op, ":")
		var result any
		var err error
		switch name {
		case "list":
			result, err = client.ServerGetList()
		case "get":
			result, err = withNumber(arg, client.ServerGet)
		case "reset":
			result, err = withNumber(arg, client.ResetGet)
		default:
			fmt.Fprintf(os.Stderr, "unknown operation %q\n", op)
			os.Exit(2)
		}
		line := map[string]any{"op": op}
		if err != nil {
			line["error"] = err.Error()
			var apiErr models.Error
			if errors.As(err, &apiErr) {
				line["code"] = string(apiErr.Code)
			}
			line["not_found"] = models.IsError(err, models.ErrorCodeServerNotFound) ||
				models.IsError(err, models.ErrorCodeNotFound)
			line["rate_limited"] = models.IsError(err, models.ErrorCodeRateLimitExceeded)
			line["unauthorized"] = models.IsError(err, models.ErrorCodeUnauthorized)
		} else {
			line["result"] = result
		}
		if err := out.Encode(line); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func withNumber[T any](arg string, call func(int) (T, error)) (T, error) {
	n, err := strconv.Atoi(arg)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("not a server number: %q", arg)
	}
	return call(n)
}
