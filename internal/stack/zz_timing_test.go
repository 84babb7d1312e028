package stack
import ("testing";"time";"context";"net")
func TestZZTiming(t *testing.T){
	ctx:=context.Background()
	l,_:=net.Listen("tcp","127.0.0.1:0"); defer l.Close()
	b:=time.Now(); err:=Status(ctx,l.Addr().String()); t.Log("status on non-grpc:",time.Since(b),err)
	dir:=t.TempDir(); p:=freePort(t)
	b=time.Now(); s,err:=EnsureTemporal(ctx,TemporalOptions{Dir:dir,Port:p,UIPort:Headless,Detached:true}); t.Log("detached start:",time.Since(b),err)
	b=time.Now(); err=StopDetached(dir); t.Log("stopdetached:",time.Since(b),err, s.PID)
}
