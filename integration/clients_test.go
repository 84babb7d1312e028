package integration

import (
	"context"

	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/airlock-dev/airlock/internal/clients"
	"github.com/airlock-dev/airlock/workers"
	"github.com/airlock-dev/airlock/workflows"
)

// Requester authentication in these tests (issue 21): every worker authenticates turn requests
// against itClients (AIRLOCK_CLIENTS, inherited by subprocesses), which registers itStarter, a
// client that may speak for the tests' principals. dial installs signingInterceptor, so every
// turn a test starts through its Temporal client is attested like a real client's; a test of
// unattested requests dials without it (dialUnsigned).
var (
	itClients     string
	itStarter     clients.Credential
	itStarterFile string
	// itBobClient is bob's own client credential, registered as client "bob" that may speak
	// for "user:*" (bob runs a chat backend); itBobOnly ("bob-cli") may speak for bob only.
	itBobClient, itBobOnly         clients.Credential
	itBobClientFile, itBobOnlyFile string
	// itGateway is the gateway credential `airlock mcp serve` attests HTTP callers' calls with
	// (AIRLOCK_MCP_GATEWAY_CREDENTIAL), registered as client "mcp-gateway" with Gateway set.
	itGateway     clients.Credential
	itGatewayFile string
)

// itPrincipals are the principals itStarter may speak for.
var itPrincipals = []string{"alice", "bob", "carol", "mallory", "ops", "user", "model-user", "chaos-requester", "requester", "replay", "dev-user", "eval-user",
	"s-1"} // the B33 case's run context, which it uses as the principal

// writeClients writes the clients file and itStarter's credential under dir and exports
// AIRLOCK_CLIENTS and AIRLOCK_CLIENT_CREDENTIAL.
func writeClients(dir string) error {
	itClients = filepath.Join(dir, "clients.json")
	itStarterFile = filepath.Join(dir, "credentials", "client-it.json")
	var err error
	if itStarter, err = clients.NewCredential("it-client"); err != nil {
		return err
	}
	if err := clients.SaveCredential(itStarterFile, itStarter); err != nil {
		return err
	}
	principals := itPrincipals
	if u := os.Getenv("USER"); clients.PrincipalPattern.MatchString(u) {
		principals = append(principals, u)
	}
	if err := clients.Add(itClients, clients.Client{Name: "it-client", PublicKey: itStarter.Public(), Principals: principals}); err != nil {
		return err
	}
	for _, x := range []struct {
		name, principal string
		cred            *clients.Credential
		file            *string
	}{{"bob", "user:*", &itBobClient, &itBobClientFile}, {"bob-cli", "bob", &itBobOnly, &itBobOnlyFile}} {
		if *x.cred, err = clients.NewCredential(x.name); err != nil {
			return err
		}
		*x.file = filepath.Join(dir, "credentials", "client-"+x.name+".json")
		if err := clients.SaveCredential(*x.file, *x.cred); err != nil {
			return err
		}
		if err := clients.Add(itClients, clients.Client{Name: x.name, PublicKey: x.cred.Public(), Principals: []string{x.principal}}); err != nil {
			return err
		}
	}
	if itGateway, err = clients.NewCredential("mcp-gateway"); err != nil {
		return err
	}
	itGatewayFile = filepath.Join(dir, "credentials", "client-mcp-gateway.json")
	if err := clients.SaveCredential(itGatewayFile, itGateway); err != nil {
		return err
	}
	if err := clients.Add(itClients, clients.Client{Name: itGateway.Name, PublicKey: itGateway.Public(), Principals: append([]string{"user:*", "oidc:*"}, principals...), Gateway: true}); err != nil {
		return err
	}
	if err := os.Setenv("AIRLOCK_MCP_GATEWAY_CREDENTIAL", itGatewayFile); err != nil {
		return err
	}
	if err := os.Setenv("AIRLOCK_CLIENTS", itClients); err != nil {
		return err
	}
	return os.Setenv("AIRLOCK_CLIENT_CREDENTIAL", itStarterFile)
}

// signing is the client interceptors every test client starts turns through.
func signing() []interceptor.ClientInterceptor {
	return []interceptor.ClientInterceptor{&signingInterceptor{}}
}

// testClients is the clients file workers built by hand (not by workers.Build) authenticate
// turn requests against (AIRLOCK_CLIENTS, as set by writeClients and inherited by the chaos
// harness's worker subprocesses).
func testClients() func() (*clients.Set, error) {
	return clients.NewSource(os.Getenv("AIRLOCK_CLIENTS")).Current
}

// signingInterceptor attests every TurnWorkflow start that carries no attestation with
// itStarter, as turn <seq> of the id "turn/<conversation>/<seq>" (a test id of another shape
// is attested as turn 1 and refused by the worker, as it should be). A request without a
// principal is given "requester": the tests' turns act for someone.
type signingInterceptor struct {
	interceptor.ClientInterceptorBase
}

func (*signingInterceptor) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &signingOutbound{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}}
}

type signingOutbound struct {
	interceptor.ClientOutboundInterceptorBase
}

func (s *signingOutbound) ExecuteWorkflow(ctx context.Context, in *interceptor.ClientExecuteWorkflowInput) (client.WorkflowRun, error) {
	if in.WorkflowType == workers.TurnWorkflowName && len(in.Args) == 1 {
		if req, ok := in.Args[0].(workflows.TurnRequest); ok && req.Attestation == nil {
			if req.Principal == "" {
				req.Principal = "requester"
			}
			workflows.SignRequest(itStarter, &req, seqOf(in.Options.ID), time.Now())
			in.Args = []any{req}
		}
	}
	return s.Next.ExecuteWorkflow(ctx, in)
}

// seqOf is the turn number at the end of a turn workflow id (1 when there is none).
func seqOf(id string) int {
	i := strings.LastIndexByte(id, '/')
	n, err := strconv.Atoi(id[i+1:])
	if i < 0 || err != nil {
		return 1
	}
	return n
}
